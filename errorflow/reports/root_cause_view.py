"""Root causes over a run, as lines for `errorflow show` (80 columns): what, where, and
in how many of the failed trials."""

from __future__ import annotations

import textwrap

from errorflow.scoring.root_cause_summary import RootCauseSummary, summary_rows


def summary_lines(s: RootCauseSummary, width: int = 80, run_id: str = "RUN_ID") -> list[str]:
    if not s["failed"]:
        return []
    head = f"Root causes of {s['failed']} failed trial(s) ({s['contaminated']} contaminated)"
    rows = summary_rows(s)
    what_w = max(len(what) for what, _, _ in rows)
    count_w = max(len(str(n)) for _, _, n in rows)
    # as wide as the longest place, never wider than `width` (a pipe's is very wide)
    widest = max(len(where) for _, where, _ in rows)
    where_w = max(10, min(widest, width - what_w - count_w - 6))
    lines = ["", head]
    for what, where, n in rows:
        parts = textwrap.wrap(where, where_w) or [""]
        lines.append(f"  {what:<{what_w}}  {parts[0]:<{where_w}}  {n:>{count_w}}".rstrip())
        lines += [f"  {'':<{what_w}}  {p}" for p in parts[1:]]
    if s["secondary"]:
        lines.append(f"  ({s['secondary']} trial(s) also failed downstream of their origin)")
    # a command to copy: on a line of its own, never wrapped
    lines += ["  one trial whole:", f"    errorflow trace {run_id} --trial N"]
    return lines
