"""Screenshots of the HTML report's charts in a real browser (Debian's chromium,
headless) for docs/: a paired run, a sweep, and the trace page of the paired run's
implicit arm (its propagation graph) that the report links.

    python bench/report_screenshots.py   # needs `apt-get install chromium` and Pillow
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

DOCS = Path(__file__).resolve().parent.parent / "docs"
CHROMIUM = [
    "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
    "--no-first-run", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--hide-scrollbars",
]  # fmt: skip


def errorflow(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "errorflow", *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def shoot(page: Path, png: Path, height: int, tmp: Path) -> None:
    subprocess.run(
        [*CHROMIUM, f"--user-data-dir={tmp / 'profile'}", f"--window-size=1100,{height}",
         f"--screenshot={png}", page.as_uri()],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip


def main() -> None:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        db = str(tmp / "r.db")
        both = json.loads(errorflow("run", "contamination", "--propagation", "both",
                                    "--trials", "40", "--json", "-q", "--db", db))  # fmt: skip
        sweep = json.loads(errorflow("sweep", "resilience-topologies", "--trials", "20",
                                     "--json", "-q", "--db", db))  # fmt: skip
        for ident, out, height in (
            (both["group_id"], "report-paired.png", 2800),
            (sweep["group_id"], "report-sweep.png", 900),
        ):
            page = tmp / f"{ident}.html"
            errorflow("report", ident, "--format", "html", "--db", db, "-o", str(page))
            save(page, out, height, tmp)
        trace = next(tmp.glob(f"trace-{both['group_id']}-implicit-t*.html"))
        save(trace, "trace-page.png", 1500, tmp)


def save(page: Path, out: str, height: int, tmp: Path) -> None:
    shoot(page, tmp / out, height, tmp)
    Image.open(tmp / out).convert("RGB").save(DOCS / out, optimize=True)
    print(f"docs/{out}")


if __name__ == "__main__":
    main()
