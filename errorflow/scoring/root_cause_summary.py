"""Root causes over a run: where contamination starts, where it is stopped, which edges
carry it (pure; `errorflow show` and `errorflow report` print it).

Each count is of trials: a trial counts once for each origin, agent or edge it has,
however many messages it took there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TypedDict

from errorflow.scoring.root_cause import RootCause


class OriginCount(TypedDict):
    kind: str
    agent: str
    tool: str | None
    code: str | None
    trials: int


class DropCount(TypedDict):
    agent: str
    how: str
    trials: int


class EdgeCount(TypedDict):
    sender: str
    recipient: str
    trials: int


class RootCauseSummary(TypedDict):
    failed: int  # failed trials (contained or contaminated) with a root cause
    contaminated: int
    origins: list[OriginCount]  # most trials first
    secondary: int  # trials with a failure downstream of an origin too
    dropped: list[DropCount]
    starts: dict[str, int]  # agent → trials where contamination starts there
    stopped: dict[str, int]  # agent → trials where it stopped contamination
    contained_at: dict[str, int]  # agent → trials where it first said so
    edges: list[EdgeCount]  # sender → recipient of contaminated messages
    depths: dict[str, int]  # contamination depth → contaminated trials


def _ranked(counter: Counter[str]) -> dict[str, int]:
    return dict(sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


def summarize_causes(causes: Iterable[RootCause]) -> RootCauseSummary:
    origins: Counter[tuple[str, str, str, str]] = Counter()
    dropped: Counter[tuple[str, str]] = Counter()
    edges: Counter[tuple[str, str]] = Counter()
    starts: Counter[str] = Counter()
    stopped: Counter[str] = Counter()
    contained: Counter[str] = Counter()
    depths: Counter[str] = Counter()
    failed = contaminated = secondary = 0
    for rc in causes:
        failed += 1
        secondary += bool(rc.secondary)
        if rc.outcome == "contaminated":
            contaminated += 1
            depths[str(rc.depth)] += 1
        origins.update({(o.kind, o.agent, o.tool or "", o.code or "") for o in rc.origins})
        dropped.update({(d.agent, d.how) for d in rc.dropped})
        edges.update(set(rc.edges))
        starts.update(set(rc.starts))
        stopped.update(set(rc.stopped))
        contained.update(set(rc.contained_at))
    return RootCauseSummary(
        failed=failed,
        contaminated=contaminated,
        origins=[
            OriginCount(kind=k, agent=a, tool=t or None, code=c or None, trials=n)
            for (k, a, t, c), n in sorted(origins.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
        secondary=secondary,
        dropped=[
            DropCount(agent=a, how=h, trials=n)
            for (a, h), n in sorted(dropped.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
        starts=_ranked(starts),
        stopped=_ranked(stopped),
        contained_at=_ranked(contained),
        edges=[
            EdgeCount(sender=a, recipient=b, trials=n)
            for (a, b), n in sorted(edges.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
        depths=dict(sorted(depths.items(), key=lambda kv: int(kv[0]))),
    )


def summary_rows(s: RootCauseSummary) -> list[tuple[str, str, int]]:
    """(what, where, trials) rows, for a table: origins, then drops, starts, stops,
    edges, where it was contained, and the depths."""
    rows: list[tuple[str, str, int]] = []
    for o in s["origins"]:
        where = " · ".join(p for p in (o["agent"], o["tool"], o["code"]) if p)
        rows.append((f"origin ({o['kind']})", where, o["trials"]))
    rows += [("dropped", f"{d['agent']} ({d['how']})", d["trials"]) for d in s["dropped"]]
    rows += [("contamination starts", a, n) for a, n in s["starts"].items()]
    rows += [("contamination stopped", a, n) for a, n in s["stopped"].items()]
    rows += [("carried by", f"{e['sender']} → {e['recipient']}", e["trials"]) for e in s["edges"]]
    rows += [("contained first", a, n) for a, n in s["contained_at"].items()]
    rows += [("depth", d, n) for d, n in s["depths"].items()]
    return rows
