"""The outcome fingerprint of a folder that capture_outcomes.sh filled: its `--json`
outputs without timings, ids, ports or timing-dependent duplicate counts, and per stored
run every trial's outcome, depth, reason and costs, every label, event counts by type,
the status and confidence of every task and result message, and every root cause (its
message ids, which are random, as `ID`).

    python bench/outcome_fingerprint.py FOLDER
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from pathlib import Path

VOLATILE = {"rejects", "wall_seconds", "run_id", "group_id", "broker", "started", "finished"}
RUN_SUFFIX = re.compile(r"-[0-9a-f]{6}\b")  # group ids inside labels and names
MESSAGE_ID = re.compile(r"\b[0-9a-f]{32}\b")


def strip(value: object) -> object:
    if isinstance(value, dict):
        return {k: strip(v) for k, v in sorted(value.items()) if k not in VOLATILE}
    if isinstance(value, list):
        return [strip(v) for v in value]
    if isinstance(value, str):
        return RUN_SUFFIX.sub("-X", value)
    return value


def stored(db: sqlite3.Connection) -> list[str]:
    lines = []
    runs = db.execute("SELECT run_id, scenario, label FROM runs ORDER BY started").fetchall()
    for i, (run_id, name, label) in enumerate(runs):
        lines.append(f"== run {i} {name} {label}")
        queries = [
            ("T", "SELECT trial, outcome, depth, reason, costs_json FROM trials"
                  " WHERE run_id = ? ORDER BY trial"),
            ("L", "SELECT trial, sender, label, reason FROM labels WHERE run_id = ?"
                  " ORDER BY trial, sender, label, reason"),
            ("E", "SELECT trial, sender, type, COUNT(*) FROM events WHERE run_id = ?"
                  " GROUP BY trial, sender, type ORDER BY trial, sender, type"),
            ("M", "SELECT trial, sender, recipient, kind, status, confidence FROM messages"
                  " WHERE run_id = ? AND kind != 'control'"
                  " ORDER BY trial, sender, recipient, kind, status, confidence"),
            ("C", "SELECT trial, cause_json FROM root_causes WHERE run_id = ? ORDER BY trial"),
        ]  # fmt: skip
        for tag, sql in queries:
            lines += [
                f"{tag} " + MESSAGE_ID.sub("ID", " ".join(map(str, row)))
                for row in db.execute(sql, (run_id,))
            ]
    return lines


def main(folder: Path) -> None:
    out = []
    for path in sorted(folder.glob("*.json")):
        out.append(f"== {path.name}\n" + json.dumps(strip(json.loads(path.read_text())), indent=1))
    with sqlite3.connect(folder / "db.sqlite") as db:
        out += stored(db)
    print("\n".join(out))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
