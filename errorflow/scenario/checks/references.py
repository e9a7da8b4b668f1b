"""The scenario's cross-references and modelling mistakes, each at the path that names it.

The model checks each block's shape; this module checks what blocks say about each
other: agents that send to, wait for or return to agents that exist; tools that exist
and fit the table they serve; needs whose tool some gathering agent holds, whose
dependencies exist, form no cycle and can reach the agent that needs them; a topology
with an entry, no `sends_to` cycle, and every agent reached; a manager's delegates
(delegation_checks). Every problem found is
reported at once (Scenario raises them as one ValidationError, which the loader words
with `file:line:col`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from errorflow.protocol import topics
from errorflow.scenario.checks.delegation_checks import delegation_problems
from errorflow.scenario.checks.discussion_checks import defence_problems, discussion_problems
from errorflow.scenario.checks.fault_checks import fault_problems
from errorflow.scenario.checks.reference_problem import Loc, Reference, unknown
from errorflow.scenario.spec.behaviour import Behaviour

__all__ = ["Loc", "Reference", "all_problems", "key_columns", "modelling_warnings", "unknown"]

if TYPE_CHECKING:
    from errorflow.scenario.spec.model import AgentSpec, Scenario
    from errorflow.scenario.spec.tool_model import ToolSpec


def all_problems(s: Scenario, reserved: frozenset[str]) -> list[Reference]:
    problems = [
        *agent_problems(s, reserved),
        *tool_problems(s),
        *fault_problems(s.tools, s.world, s.is_batch_tool),
        *need_problems(s),
        *discussion_problems(s),
        *defence_problems(s),
        *delegation_problems(s),
    ]
    if not problems:
        problems.extend(topology_problems(s))
    return problems


# -- agents -----------------------------------------------------------------------------


def agent_problems(s: Scenario, reserved: frozenset[str]) -> Iterator[Reference]:
    for name, agent in s.agents.items():
        if name in reserved:
            yield Reference(
                ("agents", name),
                f"{name!r} is reserved for the bus ({', '.join(sorted(reserved))}); "
                "rename the agent",
                name,
            )
        yield from _edge_problems(s, name, agent, "sends_to", agent.sends_to)
        yield from _edge_problems(s, name, agent, "waits_for", agent.waits_for)
        upstream = s.upstream_of(name)
        if agent.returns_to is not None and agent.returns_to not in upstream:
            msg = (
                f"returns_to must name an agent that sends to {name!r} "
                f"({', '.join(upstream) or 'none does'})"
            )
            yield Reference(("agents", name, "returns_to"), msg, agent.returns_to)
        for i, tool_name in enumerate(agent.tools):
            if tool_name not in s.tools:
                msg = unknown("tool", tool_name, s.tools) + " (define it under tools:)"
                yield Reference(("agents", name, "tools", i), msg, tool_name)


def _edge_problems(
    s: Scenario, name: str, agent: AgentSpec, field: str, targets: list[str]
) -> Iterator[Reference]:
    for i, target in enumerate(targets):
        loc = ("agents", name, field, i)
        if target == name:
            verb = "sends to" if field == "sends_to" else "waits for"
            yield Reference(loc, f"agent {name!r} {verb} itself", target)
        elif target not in s.agents:
            yield Reference(loc, unknown("agent", target, s.agents), target)
        elif target in targets[:i]:
            yield Reference(loc, f"agent {target!r} is named twice", target)


# -- tools ------------------------------------------------------------------------------


def tool_problems(s: Scenario) -> Iterator[Reference]:
    for name, tool in s.tools.items():
        if tool.service is not None and tool.service not in s.services:
            msg = unknown("service", tool.service, s.services) + " (define it under services:)"
            yield Reference(("tools", name, "service"), msg, tool.service)
        if tool.table is None:
            continue
        at: Loc = ("tools", name)
        table = s.world.tables.get(tool.table)
        if table is None:
            yield Reference(
                (*at, "table"),
                unknown("table", tool.table, s.world.tables) + " (define it under world.tables:)",
                tool.table,
            )
            continue
        yield from _table_tool_problems(at, tool, table.columns)


def _table_tool_problems(at: Loc, tool: ToolSpec, columns: list[str]) -> Iterator[Reference]:
    args = tool.args or {}
    for i, column in enumerate(tool.returns or []):
        if column not in columns:
            yield Reference((*at, "returns", i), unknown("column", column, columns), column)
    for i, column in enumerate(tool.search_fields or []):
        if column not in columns:
            yield Reference((*at, "search_fields", i), unknown("column", column, columns), column)
    for arg, column in (tool.key or {}).items():
        if tool.args is not None and arg not in args:
            yield Reference((*at, "key", arg), unknown("argument", arg, args), arg)
        if column not in columns:
            yield Reference((*at, "key", arg), unknown("column", column, columns), column)
    named: list[tuple[str, str | None]] = [("select", tool.select), ("limit", tool.limit)]
    if tool.kind == "search" and tool.query is not None:
        named.append(("query", tool.query))
    for field, name in named:
        if name is not None and tool.args is not None and name not in args:
            msg = unknown("argument", name, args) + " (declare it under args:)"
            yield Reference((*at, field), msg, name)
    if tool.kind == "lookup" and not key_columns(tool, columns):
        yield Reference(
            (*at, "key"),
            "a lookup tool matches at least one argument against a column; name them "
            f"with `key: {{ARGUMENT: COLUMN}}` (columns: {', '.join(columns)})",
            tool.key,
        )


def key_columns(tool: ToolSpec, columns: list[str]) -> dict[str, str]:
    """A lookup tool's key arguments and the columns they match (`key`, or every
    declared argument named like a column, except the `select` argument)."""
    if tool.key is not None:
        return dict(tool.key)
    return {a: a for a in (tool.args or {}) if a in columns and a != tool.select}


# -- needs ------------------------------------------------------------------------------


def need_problems(s: Scenario) -> Iterator[Reference]:
    seen: dict[str, int] = {}
    ids = [n.id for n in s.task.needs]
    dangling = False
    for i, need in enumerate(s.task.needs):
        at: Loc = ("task", "needs", i)
        if need.id in seen:
            msg = f"duplicate need id {need.id!r} (first at task.needs.{seen[need.id]})"
            yield Reference((*at, "id"), msg, need.id)
        seen.setdefault(need.id, i)
        if need.tool not in s.tools:
            msg = unknown("tool", need.tool, s.tools) + " (define it under tools:)"
            yield Reference((*at, "tool"), msg, need.tool)
        else:
            yield from _holder_problems(s, at, need.tool)
        for j, source in enumerate(need.sources):
            yield from _source_problems(s, (*at, "sources", j), need.tools[: j + 1], source)
        for arg, dep in need.depends_on().items():
            loc = (*at, "args", arg, "from")
            if dep.from_ == need.id:
                dangling = True
                yield Reference(loc, "a need cannot depend on itself", dep.from_)
            elif dep.from_ not in ids:
                dangling = True
                yield Reference(loc, unknown("need", dep.from_, ids), dep.from_)
    if not dangling:  # the graph checks need every dependency to exist
        yield from _dependency_problems(s)


def _holder_problems(s: Scenario, at: Loc, tool: str) -> Iterator[Reference]:
    holders = [n for n, a in s.agents.items() if tool in a.tools]
    gatherers = [n for n in holders if s.agents[n].does.gathers]
    if gatherers:
        return
    where = (
        f"tool {tool!r} is held only by {', '.join(holders)}, which do(es) not fetch needs"
        if holders
        else f"no agent holds tool {tool!r}"
    )
    yield Reference(
        (*at, "tool"),
        f"no agent can fetch this need: {where}; add it to the tools of an agent with "
        "role researcher (or behaviour gather / synthesise)",
        tool,
    )


def _source_problems(s: Scenario, at: Loc, before: list[str], source: str) -> Iterator[Reference]:
    """A second source is a tool of the scenario, other than the need's tool and the
    sources before it (its arguments are checked with the tools' argument models)."""
    if source not in s.tools:
        yield Reference(at, unknown("tool", source, s.tools) + " (define it under tools:)", source)
    elif source in before:
        what = "the need's tool" if source == before[0] else "named twice"
        yield Reference(at, f"source {source!r} is {what}; a source is another tool", source)


def _dependency_problems(s: Scenario) -> Iterator[Reference]:
    by_id = {n.id: (i, n) for i, n in enumerate(s.task.needs)}
    cycle = _cycle({n.id: [d.from_ for d in n.depends_on().values()] for n in s.task.needs})
    if cycle:
        i, _ = by_id[cycle[0]]
        yield Reference(
            ("task", "needs", i, "args"),
            f"the needs depend on each other in a cycle: {' -> '.join(cycle)}",
            cycle[0],
        )
        return
    for i, need in enumerate(s.task.needs):
        for arg, dep in need.depends_on().items():
            finders = s.gatherers_of(by_id[dep.from_][1].tool)
            for agent in s.gatherers_of(need.tool):
                if agent not in finders and not any(s.reaches(f, agent) for f in finders):
                    fix = f"add {agent!r} downstream of it (sends_to)"
                    if s.manager_of(agent) is not None:
                        fix += (
                            f", or give one delegate of {s.manager_of(agent)!r} both needs' "
                            "tools (its delegates work side by side)"
                        )
                    yield Reference(
                        ("task", "needs", i, "args", arg, "from"),
                        f"need {need.id!r} (fetched by {agent!r}) depends on {dep.from_!r}, "
                        f"found by {', '.join(finders) or 'nobody'}, whose results never "
                        f"reach {agent!r}; {fix}",
                        dep.from_,
                    )


def _cycle(deps: Mapping[str, list[str]]) -> list[str]:
    """A cycle in a graph of names (the names, first repeated last), or []."""
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str]:
        state[node] = 1
        for nxt in deps.get(node, []):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt] if nxt in path else [node, nxt]
            if nxt not in state:
                found = visit(nxt, [*path, nxt])
                if found:
                    return found
        state[node] = 2
        return []

    for start in deps:
        if start not in state:
            found = visit(start, [start])
            if found:
                return found
    return []


# -- topology ---------------------------------------------------------------------------


def topology_problems(s: Scenario) -> Iterator[Reference]:
    entries = s.entry_agents()
    graph = {n: s.downstream_of(n) for n in s.agents}
    cycle = _cycle(graph)
    if not entries:
        where: Loc = ("agents", cycle[0], "sends_to") if cycle else ("agents",)
        named = f": {' -> '.join(cycle)}" if cycle else ""
        yield Reference(
            where,
            f"no entry agent: every agent receives from another (sends_to forms a cycle"
            f"{named}); expected at least one agent that nobody sends to",
            cycle or list(s.agents),
        )
        return
    if cycle:
        yield Reference(
            ("agents", cycle[0], "sends_to"),
            f"sends_to forms a cycle: {' -> '.join(cycle)}; no task ever reaches these "
            "agents (each waits for every upstream result, so a cycle never starts; send "
            "work back with returns_to)",
            cycle,
        )
        return


# -- warnings ---------------------------------------------------------------------------


def modelling_warnings(s: Scenario) -> list[tuple[Loc, str]]:
    """Things that are allowed but probably not meant: a tool nobody holds, a tool an
    agent holds but never calls (no need uses it, it delivers nothing, or the agent
    routes and calls no tool), an inspector's tool no need uses, and a checking agent
    that holds no tool for claims it receives (it marks them uncertain: no trial can
    succeed)."""
    warnings: list[tuple[Loc, str]] = []
    held = {t for a in s.agents.values() for t in a.tools}
    held |= {t for a in s.agents.values() if a.inspector for t in a.inspector.tools}
    needed = {n.tool for n in s.task.needs}
    # A second source is called by an agent that checks claims (or fills gaps) with it.
    checked = needed | {t for n in s.task.needs for t in n.sources}
    for name in s.tools:
        if name not in held:
            warnings.append((("tools", name), f"tool {name!r} is defined but no agent holds it"))
    for agent_name, agent in s.agents.items():
        for i, tool in enumerate(agent.tools):
            verifies = agent.does.verifies or agent.challenge > 0
            why = _never_called(s, agent.does, tool, checked if verifies else needed)
            if why is not None:
                loc: Loc = ("agents", agent_name, "tools", i)
                warnings.append((loc, f"{agent_name!r} never calls {tool!r}: {why}"))
        for i, tool in enumerate(agent.inspector.tools if agent.inspector else []):
            if tool in s.tools and tool not in checked:
                loc = ("agents", agent_name, "inspector", "tools", i)
                msg = (
                    f"{agent_name!r}'s inspector never calls {tool!r}: no need of the task uses it"
                )
                warnings.append((loc, msg))
        if agent.does.reviews:
            warnings.extend(_unchecked(s, agent_name))
        warnings.extend(_idle_settings(s, agent_name))
    return warnings


def _idle_settings(s: Scenario, name: str) -> Iterator[tuple[Loc, str]]:
    """An agent's settings that can never act: a fault on copies to agents it never
    sends to, a `slow` reply that only the runner gets (the runner waits for every
    final result: no reply is late for it), send-backs of an agent that reviews nothing."""
    agent = s.agents[name]
    sends = _recipients(s, name)
    for i, fault in enumerate(agent.faults):
        loc: Loc = ("agents", name, "faults", i)
        to: list[str] | None = getattr(fault, "to", None)  # a crash has no recipients
        never = [t for t in to or () if t not in sends]
        if never:
            goes = ", ".join(sorted(sends)) or "nobody"
            yield (
                (*loc, "to"),
                f"{name!r} never sends to {', '.join(map(repr, never))} (its messages go to "
                f"{goes}): this {fault.kind} fault never fires on those copies",
            )
        late_for = [t for t in (to or sends) if t in sends]
        if fault.kind == "slow" and late_for and set(late_for) <= {topics.RUNNER}:
            yield (
                loc,
                f"a slow reply to the runner is never late (it waits for every final "
                f"result): this fault of {name!r} changes nothing",
            )
    if agent.max_revisions != 1 and not agent.does.reviews:
        yield (
            ("agents", name, "max_revisions"),
            f"{name!r} reviews nothing (role {agent.role!r}): max_revisions is read by reviewers",
        )


def _recipients(s: Scenario, name: str) -> set[str]:
    """Everyone `name` may send a message to: where its results go (the runner's when
    it is terminal), its peers, its delegates, and whom it sends work back to."""
    agent = s.agents[name]
    peers = {*agent.peers, *(n for n, a in s.agents.items() if name in a.peers)}
    out = {*s.downstream_of(name), *s.result_targets(name), *peers, *agent.delegates}
    if agent.returns_to:
        out.add(agent.returns_to)
    if name in s.terminal_agents():
        out.add(topics.RUNNER)
    return out


def _never_called(s: Scenario, does: Behaviour, tool: str, needed: set[str]) -> str | None:
    """Why an agent holding `tool` never calls it, or None when it does."""
    spec = s.tools.get(tool)
    if spec is None:
        return None
    if not does.calls_tools:
        return "it routes and calls no tool"
    if spec.kind == "report_sink":
        return (
            None
            if does.delivers
            else ("only an agent that synthesises (a writer) delivers a report")
        )
    if tool not in needed:
        return "no need of the task uses it"
    return None


def _unchecked(s: Scenario, checker: str) -> list[tuple[Loc, str]]:
    """A checking agent marks a claim it cannot check with its own tools as uncertain,
    so a final answer through it can never be a success: name the needs it will receive
    (fetched upstream of it) whose tool it does not hold."""
    upstream: set[str] = set()
    todo = list(s.upstream_of(checker))
    while todo:
        agent = todo.pop()
        if agent not in upstream:
            upstream.add(agent)
            todo.extend(s.upstream_of(agent))
    fetched_upstream = {t for a in upstream if s.agents[a].does.gathers for t in s.agents[a].tools}
    mine = set(s.agents[checker].tools)
    missing = [
        n.id for n in s.task.needs if n.tool in fetched_upstream and not mine.intersection(n.tools)
    ]
    if not missing:
        return []
    return [
        (
            ("agents", checker, "tools"),
            f"{checker!r} checks claims but holds no tool for need(s) {', '.join(missing)}: "
            "it marks them uncertain, so no trial can succeed; give it their tools",
        )
    ]
