"""Each agent's worst label in each trial of a stored run (contaminated > contained >
clean): what a comparison per agent reads when the run's scores were kept without
their labels (errorflow.runtime.workers drops them to keep memory flat)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

RANK = {"clean": 0, "contained": 1, "contaminated": 2}
AgentLabels = dict[int, dict[str, str]]


def agent_labels(path: Path, run_id: str) -> AgentLabels:
    out: AgentLabels = {}
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        rows = conn.execute(
            "SELECT trial, sender, label FROM labels WHERE run_id = ?", (run_id,)
        ).fetchall()
    for trial, sender, label in rows:
        worst = out.setdefault(int(trial), {})
        if RANK.get(label, 0) >= RANK.get(worst.get(sender, "clean"), 0):
            worst[sender] = label
    return out
