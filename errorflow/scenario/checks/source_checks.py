"""Second-pass checks that need every tool's argument model (a Python tool's comes
from importing its code): a need's `sources` take the need's arguments, and a
`wrong_entity` fault on a Python tool has another entity to answer for.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from pydantic import ValidationError

from errorflow.scenario.problems import Marks, Problem, problem_at
from errorflow.scenario.spec.catalog import ToolArgs
from errorflow.scenario.spec.model import NeedSpec, Scenario
from errorflow.scenario.spec.tool_args import enum_options


def source_problems(
    s: Scenario, marks: Marks, models: Mapping[str, type[ToolArgs]]
) -> Iterator[Problem]:
    """Each need's second sources against the arguments the need calls its tool with."""
    for i, need in enumerate(s.task.needs):
        for j, source in enumerate(need.sources):
            model = models.get(source)
            if model is None:
                continue  # an unknown tool (reported already) or one that did not load
            why = _refused(need, model)
            if why is not None:
                msg = f"tool {source!r} cannot serve need {need.id!r} with its arguments: {why}"
                yield problem_at(marks, ("task", "needs", i, "sources", j), msg)


def _refused(need: NeedSpec, model: type[ToolArgs]) -> str | None:
    """Why `model` refuses the need's arguments (those from another need are known
    only at run time: left out, and may be missing), or None."""
    depends = need.depends_on()
    given = {k: v for k, v in need.arguments().items() if k not in depends}
    try:
        model.model_validate(given)
    except ValidationError as exc:
        for err in exc.errors():
            name = str(err["loc"][0]) if err["loc"] else "(arguments)"
            if err["type"] == "missing" and name in depends:
                continue
            if err["type"] == "extra_forbidden":
                return f"it takes no argument {name!r} ({', '.join(model.model_fields)})"
            return f"{name}: {err['msg']}"
    return None


def python_entity_problems(
    s: Scenario, marks: Marks, models: Mapping[str, type[ToolArgs]]
) -> Iterator[Problem]:
    """A Python tool's `wrong_entity` answers another need's call or another value of
    an argument with fixed options (an `enum`, a `Literal` hint): it needs one."""
    for name, tool in s.tools.items():
        if tool.kind != "python" or name not in models:
            continue
        calls = {repr(sorted(n.arguments().items())) for n in s.task.needs if n.tool == name}
        options = [v for v in enum_options(models[name]).values() if len(v) > 1]
        if len(calls) > 1 or options:
            continue
        for i, fault in enumerate(tool.faults):
            if fault.another_entity:
                msg = (
                    f"fault {fault.kind!r} needs another entity to answer for: a Python tool "
                    "answers another need's arguments or another value of an argument with "
                    "fixed options; give it a second need, or an enum under args:"
                )
                yield problem_at(marks, ("tools", name, "faults", i, "kind"), msg)
