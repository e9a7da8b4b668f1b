"""The figures the README quotes, regenerated from the commands it quotes.

Runs the "What a run shows" example as the README shows it (its printed output), then
each command of the "Bundled scenarios" table with its defaults (through `--json`, which
runs the same seeds and settings) and prints the "measured" cell of its row in the
README's words. Paste what it prints into the README whenever the code changes what a
run measures: the README never quotes a number this script does not print.

    python bench/readme_figures.py [--only NAME ...]   (NAME: example, contamination, ...)

About 2 minutes on 2 cores (the sweeps run every cell and its fault-free baseline).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

from errorflow.runtime.experiment import ArmJson, SweepJson
from errorflow.scoring.summary import Rate

#: The README's example, as it is typed there.
EXAMPLE = ["run", "contamination", "--propagation", "both", "--trials", "50"]


class PairedJson(TypedDict):
    """What `run --propagation both --json` prints (the part read here)."""

    arms: dict[str, ArmJson]


def errorflow(args: list[str], db: Path, *, json_out: bool) -> str:
    """What `errorflow ARGS` prints on stdout (a wide terminal, no progress bars)."""
    extra = ["--json"] if json_out else []
    proc = subprocess.run(
        [sys.executable, "-m", "errorflow", *args, *extra, "-q", "--db", str(db)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "120"},
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"errorflow {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def _ci(rate: Rate) -> str:
    low, high = rate["ci95"]
    return f"{low * 100:.0f}–{high * 100:.0f} %"


def _count(arm: ArmJson, outcome: str) -> str:
    return f"{arm['outcomes'][outcome]}/{arm['trials']}"


def paired(text: str) -> str:
    """`run X --propagation both`: contamination in each arm."""
    doc: PairedJson = json.loads(text)
    ex, im = doc["arms"]["explicit"], doc["arms"]["implicit"]
    rate = ex["metrics"]["rates"]["contaminated"]
    return (
        f"implicit {_count(im, 'contaminated')} contaminated (mean depth "
        f"{im['metrics']['mean_depth']:.2f}); explicit {_count(ex, 'contaminated')} "
        f"(95 % CI {_ci(rate)}), {ex['outcomes']['contained']} contained, "
        f"{ex['outcomes']['success']} successes"
    )


def _calls(cell: ArmJson) -> tuple[float, float]:
    per = cell["metrics"]["per_trial"]
    return round(per["backend_calls"], 2), round(per["model_calls"], 2)


def _sweep(text: str) -> SweepJson:
    doc: SweepJson = json.loads(text)
    return doc


def _reference(doc: SweepJson, label: str) -> dict[str, float | int | str]:
    assert doc["reference"] is not None, "the scenario quotes published figures"
    return doc["reference"]["cells"][label]


def strategy_matrix(text: str) -> str:
    """Cells whose successes and calls per trial equal the published table's."""
    doc = _sweep(text)
    same = []
    for label, cell in doc["cells"].items():
        ref = _reference(doc, label)
        published = (float(ref["backend_calls"]), float(ref["model_calls"]))
        wins = cell["outcomes"]["success"] / cell["trials"]
        ref_wins = fraction(str(ref["success"]))
        same.append(_calls(cell) == published and abs(wins - ref_wins) < 1e-9)
    return (
        f"{sum(same)} of {len(same)} cells match the published successes and backend/model "
        f"calls per trial{'' if all(same) else ' (differ: ' + _differing(doc, same) + ')'}"
    )


def _differing(doc: SweepJson, same: list[bool]) -> str:
    return ", ".join(label for label, ok in zip(doc["cells"], same, strict=True) if not ok)


def fraction(text: str) -> float:
    """`20/20` as 1.0 (the published tables' form)."""
    num, _, den = text.partition("/")
    return int(num) / int(den)


def message_rewrite(text: str) -> str:
    doc = _sweep(text)
    raw, actionable = doc["cells"]["raw"], doc["cells"]["actionable"]
    rate = actionable["metrics"]["rates"]["success"]
    published = _reference(doc, "actionable")["success"]
    return (
        f"raw {_count(raw, 'success')} repaired; actionable {_count(actionable, 'success')} "
        f"(95 % CI {_ci(rate)}) vs published {published}"
    )


def amplification(text: str) -> str:
    doc = _sweep(text)
    measured, published = [], []
    for label, cell in doc["cells"].items():
        amp, ref = cell["amplification"], _reference(doc, label)
        measured.append(f"{label} {amp['backend_calls']:.2f}/{amp['model_calls']:.2f}")
        published.append(f"{ref['backend_amplification']:.2f}/{ref['model_amplification']:.2f}")
    base = next(iter(doc["cells"].values()))["baseline_per_trial"]
    assert base is not None, "a sweep runs its baselines"
    return (
        f"backend × / model ×: {', '.join(measured)} (published {', '.join(published)}); "
        f"baseline {base['backend_calls']:.2f} backend calls per trial"
    )


def topologies(text: str) -> str:
    doc = _sweep(text)
    cells = doc["cells"]
    shapes = list(doc["axes"][0]["values"])
    contaminated = ", ".join(
        f"{s} {cells[s + '/explicit']['outcomes']['contaminated']}/"
        f"{cells[s + '/implicit']['outcomes']['contaminated']}"
        for s in shapes
    )
    depths = " / ".join(f"{cells[s + '/implicit']['metrics']['mean_depth']:.2f}" for s in shapes)
    trials = cells[shapes[0] + "/explicit"]["trials"]
    return (
        f"contaminated explicit/implicit: {contaminated} of {trials}; mean depth implicit {depths}"
    )


def _load_cells(doc: SweepJson) -> list[str]:
    """Per cell: successes, load amplification, and the service's calls per trial."""
    out = []
    for label, cell in doc["cells"].items():
        amp = cell["amplification"]["backend_calls"]
        out.append(f"{label} {_count(cell, 'success')} success, load {amp:.2f}×")
    return out


def outage(text: str) -> str:
    doc = _sweep(text)
    parts = []
    for label, cell in doc["cells"].items():
        o = cell.get("services", {})["search_api"]["outages"][0]
        parts.append(
            f"{label}: {o['calls_during']} calls reach the service during the outage, "
            f"answered again {o['recovered_after_s']} s after it, success after "
            f"{(o['success_after'] or 0) * 100:.0f} %"
        )
    return "; ".join(parts)


def load_sweep(text: str) -> str:
    return "; ".join(_load_cells(_sweep(text)))


def runaway(text: str) -> str:
    doc = _sweep(text)
    parts = []
    for label, cell in doc["cells"].items():
        per = cell["metrics"]["per_trial"]
        parts.append(
            f"{label} {_count(cell, 'success')}, {per['model_calls']:.1f} model calls, "
            f"{per['input_tokens'] + per['output_tokens']:.0f} tokens"
        )
    return "; ".join(parts)


def silent_wrong(text: str) -> str:
    """Per defence: contamination in each propagation mode, and the cost (explicit)."""
    doc = _sweep(text)
    cells = doc["cells"]
    defences = list(doc["axes"][0]["values"])
    contaminated = ", ".join(
        f"{d} {cells[d + '/explicit']['outcomes']['contaminated']}/"
        f"{cells[d + '/implicit']['outcomes']['contaminated']}"
        for d in defences
    )
    costs = ", ".join("{:.2f}/{:.2f}".format(*_calls(cells[d + "/explicit"])) for d in defences)
    first = cells[defences[0] + "/explicit"]
    fired = ", ".join(
        f"{c['kind']} fired in {c['fired']} ({c['times']} calls)"
        for c in first.get("tool_faults", {}).values()
    )
    return (
        f"{first['trials']} trials a cell: contaminated explicit/implicit: {contaminated}; "
        f"backend/model calls per trial (explicit) {costs}; {fired} of {first['trials']} trials"
    )


#: Each row of "Bundled scenarios": its command (as the README gives it) and its figures.
ROWS: dict[str, tuple[list[str], Callable[[str], str]]] = {
    "contamination": (["run", "contamination", "--propagation", "both"], paired),
    "strategy-matrix": (["sweep", "strategy-matrix"], strategy_matrix),
    "message-rewrite": (["sweep", "message-rewrite"], message_rewrite),
    "amplification": (["sweep", "amplification", "--trials", "200"], amplification),
    "partial-success": (["run", "partial-success", "--propagation", "both"], paired),
    "topologies": (["sweep", "topologies"], topologies),
    "support-pipeline": (["run", "support-pipeline", "--propagation", "both"], paired),
    "analytics-pipeline": (["run", "analytics-pipeline", "--propagation", "both"], paired),
    "research-chain": (["run", "research-chain", "--propagation", "both"], paired),
    "order-desk": (["run", "order-desk", "--propagation", "both"], paired),
    "order-desk-mcp": (["run", "order-desk-mcp", "--propagation", "both"], paired),
    "own-agent": (["run", "own-agent", "--propagation", "both"], paired),
    "framework-agent": (["run", "framework-agent", "--propagation", "both"], paired),
    "outage": (["sweep", "outage"], outage),
    "retry-storm": (["sweep", "retry-storm"], load_sweep),
    "runaway-loop": (["sweep", "runaway-loop"], runaway),
    "silent-wrong": (["sweep", "silent-wrong"], silent_wrong),
    "manager-workers": (["run", "manager-workers", "--propagation", "both"], paired),
}


def example(db: Path) -> str:
    """The example's output as printed, without the line that varies run to run."""
    text = errorflow(EXAMPLE, db, json_out=False)
    kept = [line for line in text.splitlines() if not line.startswith("wall time")]
    return "\n".join([f"$ errorflow {' '.join(EXAMPLE)}", *kept])


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    p.add_argument("--only", nargs="+", choices=["example", *ROWS], help="some of them")
    names = p.parse_args().only or ["example", *ROWS]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "readme.db"
        if "example" in names:
            print("## What a run shows\n")
            print(example(db) + "\n")
        for name, (args, figures) in ROWS.items():
            if name in names:
                measured = figures(errorflow(args, db, json_out=True))
                print(f"| `{name}` | `errorflow {' '.join(args)}` | {measured} |")


if __name__ == "__main__":
    main()
