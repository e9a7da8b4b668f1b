"""The agent's own bookkeeping: which failures count as recovered, and what is reported."""

from __future__ import annotations

from pathlib import Path

from errorflow.bus.transport import InProcessBus
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.scenario.loader import load_text

TWO_NEEDS = """
name: two-needs
seed: 1
trials: 5
world:
  metrics: {a.x: 1, a.y: 2}
tools:
  q:
    kind: metric_store
    faults: [{kind: not_found, first_n: 1}]
agents:
  researcher:
    role: researcher
    tools: [q]
    policy: {strategy: classify}
    model: {params: {p_drop_required_arg: 0.0}}
task:
  prompt: get both
  needs:
    - {id: x, tool: q, arg: name, wording: x, value: a.x}
    - {id: y, tool: q, arg: name, wording: y, value: a.y}
"""


async def test_a_failure_on_a_tool_that_also_succeeded_is_still_reported(
    tmp_path: Path,
) -> None:
    # need x gets a 404, need y succeeds on the same tool: the 404 is not "recovered"
    result = await run_scenario(
        load_text(TWO_NEEDS), RunOptions(bus=InProcessBus(), db_path=tmp_path / "a.db")
    )
    for messages in result.messages.values():
        final = next(m for m in messages if m.recipient == "runner")
        assert final.status.value == "partial_failure"
        assert [e.code.value for e in final.errors] == ["not_found"]
        assert final.payload["trace"]["failures"] == ["not_found"]
        assert final.payload["answer"]["unresolved"] == ["x"]
    assert result.outcomes["contained"] == 5


async def test_a_repaired_argument_is_recovered(tmp_path: Path) -> None:
    text = TWO_NEEDS.replace("faults: [{kind: not_found, first_n: 1}]", "faults: []")
    result = await run_scenario(
        load_text(text), RunOptions(bus=InProcessBus(), db_path=tmp_path / "b.db")
    )
    assert result.outcomes["success"] == 5
