"""Second-pass checks that need every tool's argument model (a Python tool's comes
from importing its code): a `wrong_entity` fault on a Python tool has another entity
to answer for.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from errorflow.scenario.catalog import ToolArgs
from errorflow.scenario.model import Scenario
from errorflow.scenario.problems import Marks, Problem, problem_at
from errorflow.scenario.tool_args import enum_options


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
            if fault.kind == "wrong_entity":
                msg = (
                    "fault 'wrong_entity' needs another entity to answer for: a Python tool "
                    "answers another need's arguments or another value of an argument with "
                    "fixed options; give it a second need, or an enum under args:"
                )
                yield problem_at(marks, ("tools", name, "faults", i, "kind"), msg)
