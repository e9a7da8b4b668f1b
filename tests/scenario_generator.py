"""Random valid scenarios of the kinds users write, for the invariants every one of them
must keep (tests/test_generated_scenarios.py, bench/bench_generated_scenarios.py).

A hypothesis strategy draws a topology (a chain, a fan-out to gatherers and fan-in at a
writer, a chain with a reviewer that sends work back, a discussion of peers, a manager
that sends its delegates sub-tasks and collects their results), 2-12 agents, the tools
each gathering agent holds (declarative lookups and searches, batch lookups, metric
stores, Python tools), the needs of the task (plain, dependent on another need's answer
or a field of it, derived from two needs' answers, over a batch need's whole answer),
and optionally the faults of each tool, the agents' breakers and a manager's worker
that never answers. Each draw is a plain dict, validated by `errorflow.api.load` like a
file, so the generator can only produce what a user can write.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from errorflow import api
from errorflow.protocol.envelope import Kind
from errorflow.scoring.score import Label, Truth

TOOLS_FILE = Path(__file__).resolve().parent / "own_systems" / "gen_tools.py"

#: The world every generated scenario shares: metrics, a table of records, a batch table.
WORLD: dict[str, Any] = {
    "metrics": {
        "rev.q1": 1200,
        "rev.q2": 1350,
        "cost.q1": 700,
        "cost.q2": 810,
        "fx.eur": 1.08,
    },
    "tables": {
        "cities": {
            "key": "id",
            "rows": [
                {"id": "C-1", "name": "alpha", "population": 120000, "region": "north"},
                {"id": "C-2", "name": "beta", "population": 54000, "region": "south"},
                {"id": "C-3", "name": "gamma", "population": 8800, "region": "north"},
            ],
        },
        "sales": {
            "key": "day",
            "rows": [
                {"day": "mon", "revenue": 100},
                {"day": "tue", "revenue": 250},
                {"day": "wed", "revenue": 75},
            ],
        },
    },
}

#: Tool name -> spec. Each need family below uses one of them.
TOOLS: dict[str, dict[str, Any]] = {
    "kpi": {"kind": "metric_store"},
    "city": {
        "kind": "lookup",
        "table": "cities",
        "args": {"id": {"type": "string"}, "field": {"type": "string"}},
        "select": "field",
    },
    "daily": {
        "kind": "lookup",
        "table": "sales",
        "args": {"days": {"type": "array", "items": "string"}},
        "key": {"days": "day"},
        "returns": ["revenue"],
    },
    "scale": {"kind": "python", "function": f"{TOOLS_FILE}:scale"},
    "total": {"kind": "python", "function": f"{TOOLS_FILE}:total"},
    "code": {"kind": "python", "function": f"{TOOLS_FILE}:code_of"},
    "convert": {"kind": "python", "function": f"{TOOLS_FILE}:convert"},
}

#: Need families: (the needs, the tools they use, which need each depends on).
FAMILIES: dict[str, list[dict[str, Any]]] = {
    "metric": [{"id": "rev", "tool": "kpi", "wording": "Q1 revenue", "value": "rev.q1"}],
    "metric2": [{"id": "cost", "tool": "kpi", "wording": "Q2 cost", "value": "cost.q2"}],
    "record": [
        {
            "id": "pop",
            "tool": "city",
            "wording": "the population of C-2",
            "args": {"id": "C-2", "field": "population"},
        }
    ],
    "derived": [
        {"id": "base", "tool": "kpi", "wording": "Q2 revenue", "value": "rev.q2"},
        {"id": "scaled", "tool": "scale", "wording": "the scaled revenue",
         "args": {"x": {"from": "base"}}},
    ],
    "batch": [
        {"id": "days", "tool": "daily", "wording": "the daily revenue",
         "args": {"days": ["mon", "tue", "wed"]}},
        {"id": "week", "tool": "total", "wording": "the week's total",
         "args": {"daily": {"from": "days"}}},
    ],
    "converted": [
        {"id": "eur", "tool": "kpi", "wording": "Q1 cost in EUR", "value": "cost.q1"},
        {"id": "rate", "tool": "kpi", "wording": "the EUR rate", "value": "fx.eur"},
        {"id": "usd", "tool": "convert", "wording": "Q1 cost in USD",
         "args": {"amount": {"from": "eur"}, "rate": {"from": "rate"}}},
    ],
    "chained-id": [
        {"id": "cid", "tool": "code", "wording": "the code of beta", "args": {"name": "beta"}},
    ],
}  # fmt: skip

FAULTS: list[dict[str, Any]] = [
    {"kind": "transient", "p": 0.3},
    {"kind": "timeout", "p": 0.2},
    {"kind": "rate_limit", "p": 0.3, "retry_after_s": 2},
    {"kind": "permission", "p": 0.2},
    {"kind": "empty", "p": 0.3},
    {"kind": "not_found", "p": 0.2},
    {"kind": "bad_args", "p": 0.3},
    {"kind": "malformed_call", "p": 0.3},
]

#: Breakers the agents may have: quick to open and to probe, for one trial or the run
#: (a probe refused before it reaches the tool must not hold the breaker half-open).
BREAKERS: list[dict[str, Any] | None] = [
    None,
    {"enabled": True, "failure_threshold": 1, "cooldown_s": 0.2, "half_open_probes": 1},
    {"enabled": True, "failure_threshold": 2, "cooldown_s": 0.1, "half_open_probes": 2,
     "scope": "run"},
    {"enabled": True, "failure_threshold": 1, "cooldown_s": 0.1, "half_open_probes": 1,
     "scope": "run"},
    {"enabled": True, "failure_threshold": 1, "cooldown_s": 0.1, "half_open_probes": 1,
     "scope": "run"},
]  # fmt: skip

#: A model that makes no mistakes of its own: what is left to go wrong is the system.
FLAWLESS = {"p_drop_required_arg": 0.0, "p_call_unknown_tool": 0.0}

TOPOLOGIES = ("chain", "fan", "review", "discussion", "manager")

#: What a worker of a manager may do wrong in a scenario with faults: never answer.
WORKER_FAULTS: list[dict[str, Any] | None] = [None, {"kind": "hang", "p": 0.2}]


def _needs(families: list[str]) -> list[dict[str, Any]]:
    return [dict(n) for f in families for n in FAMILIES[f]]


def _depends(need: dict[str, Any]) -> list[str]:
    return [a["from"] for a in (need.get("args") or {}).values() if isinstance(a, dict)]


def _tools_of(needs: list[dict[str, Any]]) -> list[str]:
    return sorted({n["tool"] for n in needs})


@st.composite
def scenarios(draw: st.DrawFn, *, faults: bool = False) -> dict[str, Any]:
    """One scenario as plain data (validated by the caller with `api.load`)."""
    families = draw(
        st.lists(st.sampled_from(sorted(FAMILIES)), min_size=1, max_size=4, unique=True)
    )
    needs = _needs(families)
    topology = draw(st.sampled_from(TOPOLOGIES))
    n_agents = draw(st.integers(min_value=2, max_value=12))
    agents = _TOPOLOGY[topology](draw, needs, n_agents)
    tools = {name: dict(TOOLS[name]) for name in _tools_of(needs)}
    if faults:
        for spec in tools.values():
            fault_kinds = draw(
                st.lists(st.sampled_from(FAULTS), max_size=2, unique_by=lambda f: f["kind"])
            )
            spec["faults"] = [dict(f) for f in fault_kinds]
    data: dict[str, Any] = {
        "name": f"gen-{topology}",
        "seed": draw(st.integers(min_value=0, max_value=2**31)),
        "trials": 6,
        # The two arms answer each model decision with the same draw, so explicit
        # against implicit compares propagation, not luck.
        "draws": "paired",
        "world": WORLD,
        "tools": tools,
        "agents": agents,
        "task": {"prompt": "Answer the question.", "needs": needs},
    }
    if faults and topology == "manager":
        worker = draw(st.sampled_from(agents["manager"]["delegates"]))
        hang = draw(st.sampled_from(WORKER_FAULTS))
        if hang is not None:
            agents[worker]["faults"] = [dict(hang)]
    if topology == "discussion":
        members = [a for a, spec in agents.items() if spec.get("peers") is not None]
        data["discussion"] = {"rounds": draw(st.integers(1, 2)), "decides": [members[-1]]}
    strategy = draw(st.sampled_from(["resilient", "tell-model", "classify", "blind-retry"]))
    breaker = draw(st.sampled_from(BREAKERS)) if faults else None
    policy: dict[str, Any] = {"strategy": strategy}
    if breaker is not None:
        policy["breaker"] = dict(breaker)
        if breaker.get("scope") == "run":  # trials apart in run time: cooldowns elapse
            data["arrivals"] = {"process": "uniform", "rate_per_s": 2}
    for spec in agents.values():
        spec.setdefault("policy", dict(policy))
    return data


def _split(draw: st.DrawFn, needs: list[dict[str, Any]], holders: int) -> list[list[str]]:
    """The tools of `holders` gathering agents in order: each need family's tools go to
    one agent, a dependency's tool never after the dependent's (its value must reach
    the agent that needs it)."""
    slots: list[list[str]] = [[] for _ in range(holders)]
    by_need = {n["id"]: n for n in needs}
    placed: dict[str, int] = {}
    for n in needs:
        low = max((placed.get(by_need[d]["tool"], 0) for d in _depends(n)), default=0)
        tool = n["tool"]
        if tool in placed:
            continue
        slot = draw(st.integers(min_value=low, max_value=holders - 1))
        placed[tool] = slot
        slots[slot].append(tool)
    return slots


def _chain(draw: st.DrawFn, needs: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """a0 -> a1 -> ... -> writer; gatherers hold the tools, some agents only route."""
    holders = max(1, n - 1)
    slots = _split(draw, needs, holders)
    agents: dict[str, Any] = {}
    names = [f"a{i}" for i in range(holders)] + ["writer"]
    for i, tools in enumerate(slots):
        nxt = names[i + 1]
        if tools:
            agents[names[i]] = {"role": "researcher", "tools": tools, "sends_to": [nxt]}
        else:
            agents[names[i]] = {"role": "router", "behaviour": "route", "sends_to": [nxt]}
    agents["writer"] = {"role": "writer"}
    return agents


def _fan(draw: st.DrawFn, needs: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """A manager routes the task to gatherers (one per independent family) whose
    results fan in at a writer; dependent needs stay with their source's gatherer."""
    groups: dict[str, list[str]] = {}
    for need in needs:
        deps = _depends(need)
        owner = next(
            (
                k
                for k, ts in groups.items()
                if any(src["tool"] in ts for src in needs if src["id"] in deps)
            ),
            None,
        )
        key = owner or need["id"]
        groups.setdefault(key, [])
        if need["tool"] not in groups[key]:
            groups[key].append(need["tool"])
    workers = [ts for ts in groups.values() if ts]
    # More workers than families duplicate a tool whose needs depend on nothing.
    free = sorted({nd["tool"] for nd in needs if not _depends(nd)})
    width = max(len(workers), min(n - 2, 8)) if n > 2 and free else len(workers)
    agents: dict[str, Any] = {"manager": {"role": "manager", "behaviour": "route"}}
    names = [f"w{i}" for i in range(max(1, width))]
    for i, name in enumerate(names):
        held = workers[i] if i < len(workers) else [draw(st.sampled_from(free))]
        agents[name] = {"role": "researcher", "tools": held, "sends_to": ["writer"]}
    agents["manager"]["sends_to"] = names
    agents["writer"] = {"role": "writer"}
    return agents


def _review(draw: st.DrawFn, needs: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """A chain whose last gatherer's work is checked by a reviewer holding every tool,
    which sends contradicted work back to it and passes the rest to the writer."""
    agents = _chain(draw, needs, max(2, n - 1))
    last = next(a for a, s in agents.items() if s.get("sends_to") == ["writer"])
    agents[last]["sends_to"] = ["reviewer"]
    agents["reviewer"] = {"role": "reviewer", "tools": _tools_of(needs), "sends_to": ["writer"]}
    if agents[last].get("tools"):  # work goes back to a gatherer, never to a router
        agents["reviewer"]["returns_to"] = last
        agents["reviewer"]["max_revisions"] = draw(st.integers(0, 2))
    return agents


def _discussion(draw: st.DrawFn, needs: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """Peers that each hold every tool discuss; the last decides and tells the writer."""
    members = [f"p{i}" for i in range(max(2, min(n - 1, 5)))]
    tools = _tools_of(needs)
    agents: dict[str, Any] = {}
    for i, name in enumerate(members):
        agents[name] = {"role": "researcher", "tools": tools, "peers": members[i + 1 :]}
    agents[members[-1]]["sends_to"] = ["writer"]
    agents["writer"] = {"role": "writer"}
    return agents


def _manager(draw: st.DrawFn, needs: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """The fan's workers as a manager's delegates: it sends each its sub-task and
    collects their results itself; it writes the answer, or passes the findings on
    (gathering or routing) to a writer."""
    agents = _fan(draw, needs, n)
    workers = agents["manager"]["sends_to"]
    for name in workers:
        del agents[name]["sends_to"]
    behaviour = draw(st.sampled_from(["synthesise", "gather", "route"]))
    manager: dict[str, Any] = {"role": "manager", "behaviour": behaviour, "delegates": workers}
    if behaviour == "synthesise":
        del agents["writer"]
    else:
        manager["sends_to"] = ["writer"]
    agents["manager"] = manager
    return agents


_TOPOLOGY = {
    "chain": _chain,
    "fan": _fan,
    "review": _review,
    "discussion": _discussion,
    "manager": _manager,
}


def flawless(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with no faults and a model that makes no mistakes of its own."""
    out = {**data, "tools": {k: {**v, "faults": []} for k, v in data["tools"].items()}}
    out["agents"] = {
        k: {**v, "model": {"backend": "simulated", "params": FLAWLESS}, "faults": []}
        for k, v in data["agents"].items()
    }
    return out


def whole_and_true_but_contaminated(result: api.Result, truth: Truth) -> list[int]:
    """Trials whose final answer states every need, every claim true, yet is labelled
    contaminated."""
    bad = []
    for score in result.raw.scores:
        labels = {lb.message_id: lb for lb in score.labels}
        for m in result.raw.messages.get(score.trial, []):
            if m.kind is not Kind.RESULT or m.recipient != "runner" or m.id not in labels:
                continue
            claims = m.payload.get("answer", {}).get("claims", [])
            stated = {c["key"] for c in claims if c.get("certain", True)}
            true = all(truth.is_true(c["key"], c.get("value")) for c in claims)
            if true and set(truth.values) <= stated and labels[m.id].label is Label.CONTAMINATED:
                bad.append(score.trial)
    return bad
