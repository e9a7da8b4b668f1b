"""The checks the scenario model cannot make: the loader's second pass.

The model leaves some blocks as free data or cannot know what they mean: an agent's
policy block (built by `AgentPolicy.build`), the simulated model's profile (a built-in
or a file) and params, a need's argument against its tool kind's schema, and the size
limits documented in scenarios/FORMAT.md ("Limits"). Every problem is
reported at the path that causes it, worded like the model's own.

Policy blocks are built before the model validates the scenario (`prebuilt_policies`),
so the model receives them ready and nothing builds them twice; their problems are
held back for the second pass, because a scenario whose shape is wrong reports that
first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping

from pydantic import ValidationError

from errorflow.policies.config import PolicyConfig
from errorflow.policies.strategies import PRESETS, merged_data
from errorflow.scenario.checks.explain import clean_loc, message, problems_from
from errorflow.scenario.checks.source_checks import python_entity_problems, source_problems
from errorflow.scenario.checks.wording import closest, found, unknown_name
from errorflow.scenario.problems import (
    LIMITS_HINT,
    Marks,
    NodePath,
    Problem,
    problem_at,
)
from errorflow.scenario.provenance.profile_file import is_profile_path
from errorflow.scenario.provenance.view import base_profile, merged
from errorflow.scenario.python_agent_ref import PythonAgentError, load_agent_callable
from errorflow.scenario.python_ref import PythonToolError, load_callable, signature_args_model
from errorflow.scenario.spec.agent_policy import AgentPolicy, split
from errorflow.scenario.spec.catalog import ARG_MODELS, ToolArgs
from errorflow.scenario.spec.model import (
    MAX_DOCUMENT_BYTES,
    MAX_FINDINGS_BYTES,
    MAX_STEPS,
    MAX_TOOLS,
    AgentSpec,
    NeedSpec,
    Scenario,
    ToolSpec,
)
from errorflow.scenario.spec.profiles import PROFILES, Tendencies
from errorflow.scenario.spec.tool_args import tool_args_model

#: Problems of the agents' policy blocks, by agent name.
PolicyProblems = Mapping[str, list[Problem]]


def prebuilt_policies(
    data: Mapping[str, object], marks: Marks
) -> tuple[dict[str, object], PolicyProblems]:
    """`data` with every agent's policy block built, or left at the default where it
    cannot be, and the problems of those blocks. Blocks that are not a mapping of
    names stay as they are, for the model to report."""
    agents = data.get("agents")
    if not isinstance(agents, dict):
        return dict(data), {}
    prepared: dict[object, object] = {}
    problems: dict[str, list[Problem]] = {}
    for name, agent in agents.items():
        block = agent.get("policy") if isinstance(agent, dict) else None
        if not (isinstance(block, dict) and all(isinstance(k, str) for k in block)):
            prepared[name] = agent
            continue
        assert isinstance(agent, dict)
        policy, problems[str(name)] = _build_policy(block, ("agents", str(name), "policy"), marks)
        prepared[name] = {**agent, "policy": policy or AgentPolicy.default()}
    return {**data, "agents": prepared}, problems


def _build_policy(
    block: Mapping[str, object], at: NodePath, marks: Marks
) -> tuple[AgentPolicy | None, list[Problem]]:
    strategy, overrides = split(block)
    if not isinstance(strategy, str):
        msg = f"expected a strategy name ({', '.join(PRESETS)}), found {found(strategy)}"
        return None, [problem_at(marks, (*at, "strategy"), msg)]
    if strategy not in PRESETS:
        return None, [
            problem_at(marks, (*at, "strategy"), unknown_name("strategy", strategy, PRESETS))
        ]
    try:
        policy = AgentPolicy.build(block)
    except ValidationError as exc:
        merged = merged_data(strategy, overrides)
        return None, problems_from(exc, merged, marks, PolicyConfig, at)
    except ValueError as exc:
        return None, [problem_at(marks, at, str(exc))]
    steps = policy.config.guards.max_steps
    if steps > MAX_STEPS:
        msg = f"expected at most {MAX_STEPS} steps per task, found {steps} ({LIMITS_HINT})"
        return policy, [problem_at(marks, (*at, "guards", "max_steps"), msg)]
    return policy, []


def semantic_problems(s: Scenario, policies: PolicyProblems, marks: Marks) -> list[Problem]:
    """Every problem of the second pass, in the order found."""
    problems: list[Problem] = []
    if len(s.tools) > MAX_TOOLS:
        msg = f"expected at most {MAX_TOOLS} tools, found {len(s.tools)} ({LIMITS_HINT})"
        problems.append(problem_at(marks, ("tools",), msg))
    for name, agent in s.agents.items():
        problems.extend(policies.get(name, []))
        problems.extend(_model_problems(name, agent, marks))
        if agent.function is not None:  # its code imported: it exists and can be an agent
            try:
                load_agent_callable(name, agent.function)
            except PythonAgentError as exc:
                problems.append(problem_at(marks, ("agents", name, "function"), str(exc)))
    problems.extend(_document_problems(s, marks))
    models, python = _tool_models(s, marks)
    problems.extend(python)
    problems.extend(_need_problems(s, marks, models))
    problems.extend(source_problems(s, marks, models))
    problems.extend(python_entity_problems(s, marks, models))
    return problems


def _tool_models(s: Scenario, marks: Marks) -> tuple[dict[str, type[ToolArgs]], list[Problem]]:
    """Every tool's argument model; a Python tool's code is imported to build it (a
    tool that cannot be loaded is a problem at its `function`)."""
    models: dict[str, type[ToolArgs]] = {}
    problems: list[Problem] = []
    for name, tool in s.tools.items():
        model = tool_args_model(name, tool, s.world.tables)
        if tool.kind == "python":
            assert tool.function is not None
            try:
                fn = load_callable(tool.function)
                model = signature_args_model(fn, name, tool.args)
            except PythonToolError as exc:
                problems.append(problem_at(marks, ("tools", name, "function"), str(exc)))
                continue
        if model is not None:
            models[name] = model
    return models, problems


def _model_problems(name: str, agent: AgentSpec, marks: Marks) -> list[Problem]:
    """The simulated model's profile and behaviour overrides; a real model's name."""
    at: NodePath = ("agents", name, "model")
    model = agent.model
    if model.backend != "simulated":
        if model.model:
            return []
        msg = (
            f"missing required field 'model' for backend {model.backend!r} "
            "(the name of the model to call)"
        )
        return [problem_at(marks, at, msg)]
    if not is_profile_path(model.profile) and model.profile not in PROFILES:
        msg = unknown_name("model profile", model.profile, PROFILES)
        return [problem_at(marks, (*at, "profile"), msg)]
    try:
        _, _, base = base_profile(model.profile, model.profile_file)
    except ValueError as exc:
        return [problem_at(marks, (*at, "profile"), str(exc))]
    try:
        model.tendencies()
    except ValidationError as exc:
        fields = merged(base, model.params)
        return problems_from(exc, fields, marks, Tendencies, (*at, "params"))
    return []


def _document_problems(s: Scenario, marks: Marks) -> Iterator[Problem]:
    for doc_id, text in s.world.documents.items():
        size = len(text.encode("utf-8"))
        if size > MAX_DOCUMENT_BYTES:
            yield problem_at(
                marks,
                ("world", "documents", doc_id),
                f"expected a document of at most {MAX_DOCUMENT_BYTES} bytes, found {size} "
                f"bytes ({LIMITS_HINT})",
            )


def _need_problems(
    s: Scenario, marks: Marks, models: Mapping[str, type[ToolArgs]]
) -> Iterator[Problem]:
    """Each need's arguments against its tool, and what the needs fetch in total."""
    total = 0
    reported = False
    for i, need in enumerate(s.task.needs):
        at: NodePath = ("task", "needs", i)
        tool = s.tools.get(need.tool)
        if tool is None:
            continue  # reported by Scenario._references
        if tool.kind in ARG_MODELS:
            yield from _need_argument_problems(need, tool, at, marks)
            assert need.value is not None
            total += _findings_bytes(s, need.value, tool.kind)
        elif need.tool in models:
            yield from _declared_argument_problems(need, models[need.tool], at, marks)
            total += _table_bytes(s, tool)
        if total > MAX_FINDINGS_BYTES and not reported:
            reported = True
            yield problem_at(
                marks,
                at,
                f"expected the needs to fetch at most {MAX_FINDINGS_BYTES} bytes (they travel "
                f"in one message), found {total} bytes by this need ({LIMITS_HINT})",
            )


def _need_argument_problems(
    need: NeedSpec, tool: ToolSpec, at: NodePath, marks: Marks
) -> Iterator[Problem]:
    args_model = ARG_MODELS[tool.kind]  # type: ignore[index]  # a built-in kind
    if need.arg not in args_model.model_fields:
        close = closest(need.arg, args_model.model_fields)
        hint = (
            f"did you mean {close!r}?"
            if close
            else f"expected one of: {', '.join(args_model.model_fields)}"
        )
        yield problem_at(
            marks,
            (*at, "arg"),
            f"tool {need.tool!r} (kind {tool.kind}) takes no argument {need.arg!r}; {hint}",
        )
        return
    try:
        args_model.model_validate({need.arg: need.value})
    except ValidationError as exc:
        for err in exc.errors():
            if err["loc"][:1] != (need.arg,):
                continue
            sub, _ = clean_loc(err["loc"][1:], need.value, False)
            msg = message(err, args_model, (need.arg, *sub), False)
            yield problem_at(
                marks,
                (*at, "value", *sub),
                f"not a valid {need.arg!r} for tool {need.tool!r} (kind {tool.kind}): {msg}",
            )


def _declared_argument_problems(
    need: NeedSpec, model: type[ToolArgs], at: NodePath, marks: Marks
) -> Iterator[Problem]:
    """A need's arguments against a declared tool's (those from another need are only
    known at run time: they are left out, and may be missing)."""
    depends = need.depends_on()
    given = {k: v for k, v in need.arguments().items() if k not in depends}
    args_at: NodePath = (*at, "args") if need.args is not None else (*at, "value")
    try:
        model.model_validate(given)
    except ValidationError as exc:
        for err in exc.errors():
            name = str(err["loc"][0]) if err["loc"] else ""
            if err["type"] == "missing" and name in depends:
                continue
            where: NodePath = (
                (*args_at, name) if need.args is not None and name in given else args_at
            )
            if err["type"] == "extra_forbidden":
                close = closest(name, model.model_fields)
                hint = (
                    f"did you mean {close!r}?"
                    if close
                    else (f"expected one of: {', '.join(model.model_fields)}")
                )
                msg = f"tool {need.tool!r} takes no argument {name!r}; {hint}"
            else:
                msg = f"not a valid {name!r} for tool {need.tool!r}: {err['msg']}"
            yield problem_at(marks, where, msg)


def _table_bytes(s: Scenario, tool: ToolSpec) -> int:
    """What a declared tool can return at most: its whole table (a search), one row."""
    table = s.world.tables.get(tool.table or "")
    if table is None:
        return 0
    sizes = [len(json.dumps(row, ensure_ascii=False)) for row in table.rows]
    return sum(sizes) if tool.kind == "search" else max(sizes, default=0)


def _findings_bytes(s: Scenario, value: str | list[str], kind: str) -> int:
    """A generous estimate of how many bytes the answer to one need carries."""
    values = value if isinstance(value, list) else [value]
    if kind == "batch_fetch":
        return sum(len(s.world.documents.get(v, "").encode("utf-8")) + len(v) for v in values)
    if kind == "metric_store":
        return sum(len(json.dumps(s.world.metrics.get(v), ensure_ascii=False)) for v in values)
    if kind == "paper_search":
        return sum(len(p.id) + 4 for p in s.world.papers)
    return 0
