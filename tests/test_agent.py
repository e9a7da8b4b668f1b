"""The agent's own bookkeeping: which failures count as recovered, and what is reported."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from errorflow.agents import agent as agent_module
from errorflow.agents.agent import Agent
from errorflow.agents.inputs import Ready
from errorflow.agents.kit import AgentKit
from errorflow.bus.transport import InProcessBus
from errorflow.models.backend import TaskTurn
from errorflow.protocol import topics
from errorflow.protocol.envelope import Status
from errorflow.runtime.participants import make_agent
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.scenario.loader import load_text
from errorflow.scenario.run_plan import RunPlan

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


FAN_OUT = """
name: fan-out
seed: 3
trials: 2
world:
  metrics: {a.x: 1}
tools:
  q:
    kind: metric_store
    faults: [{kind: not_found, first_n: 1}]
agents:
  researcher:
    role: researcher
    tools: [q]
    sends_to: [writer, auditor]
    policy: {strategy: tell-model, guards: {max_steps: 1}}
    model: {params: {p_drop_required_arg: 0.0}}
  writer: {role: writer}
  auditor: {role: writer}
task:
  prompt: get x
  needs:
    - {id: x, tool: q, arg: name, wording: x, value: a.x}
"""


async def test_every_recipient_gets_the_same_result_and_the_costs_once(tmp_path: Path) -> None:
    result = await run_scenario(
        load_text(FAN_OUT), RunOptions(bus=InProcessBus(), db_path=tmp_path / "f.db")
    )
    for messages in result.messages.values():
        sent = {m.recipient: m for m in messages if m.sender == "researcher"}
        first, second = sent["writer"], sent["auditor"]
        assert first.payload["trace"]["costs"]["backend_calls"] >= 1
        assert first.payload["trace"]["costs"]["model_calls"] >= 1
        assert second.payload["trace"]["costs"] == {}
        assert first.payload["stopped"] == second.payload["stopped"] == "step_limit"
        assert first.payload["trace"]["failures"] == second.payload["trace"]["failures"]
        assert first.payload["trace"]["failures"] == ["not_found"]
        assert (first.status, first.confidence, first.errors) == (
            second.status,
            second.confidence,
            second.errors,
        )
        assert first.status is Status.FAILED and first.confidence == 0.4
        assert [(e.code.value, e.origin, e.hops) for e in first.errors] == [
            ("not_found", "researcher", 0)
        ]
        for name in ("writer", "auditor"):  # the error travels on, one hop further
            final = next(m for m in messages if m.sender == name)
            assert [(e.origin, e.hops) for e in final.errors] == [("researcher", 1)]


async def test_a_crashed_agent_reports_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(self: AgentKit, trial: int) -> TaskTurn:
        raise KeyError("agent bug in /srv/app/secret.py")

    monkeypatch.setattr(AgentKit, "task_turn", crash)
    text = TWO_NEEDS.replace("trials: 5", "trials: 1")
    result = await run_scenario(
        load_text(text), RunOptions(bus=InProcessBus(), db_path=tmp_path / "c.db")
    )
    final = next(m for m in result.messages[0] if m.recipient == "runner")
    assert final.status is Status.FAILED and final.confidence == 0.4
    assert final.payload["stopped"] == "crashed"
    assert final.payload["trace"] == {"costs": {}, "failures": ["internal_error"]}
    assert final.payload["answer"]["unresolved"] == ["x", "y"]
    [error] = final.errors
    assert (error.code.value, error.tool, error.origin, error.hops) == (
        "internal_error",
        "researcher",
        "researcher",
        0,
    )
    assert "/srv/app" not in final.model_dump_json()


CHAIN_ROLES = """
name: roles
seed: 2
trials: 4
world:
  metrics: {a.x: 1}
tools:
  q: {kind: metric_store}
  out: {kind: report_sink}
agents:
  planner:
    {role: planner, behaviour: route, instructions: Plan it., tools: [q], sends_to: [analyst]}
  analyst:
    role: analyst
    behaviour: gather
    instructions: Read the metric.
    tools: [q]
    model: {params: {p_drop_required_arg: 0.0}}
    sends_to: [writer]
  writer: {role: writer, tools: [out]}
task:
  prompt: get x
  needs:
    - {id: x, tool: q, wording: x, value: a.x}
"""


async def test_the_persona_follows_the_declared_behaviour_and_instructions() -> None:
    scenario = load_text(CHAIN_ROLES)
    bus = InProcessBus()

    async def agent(name: str) -> Agent:
        return make_agent(
            RunPlan(scenario), name, "run", await bus.connect(name), run_key=b"k" * 32
        )

    planner, analyst, writer = [await agent(n) for n in ("planner", "analyst", "writer")]
    planner_, analyst_, writer_ = planner.kit.persona, analyst.kit.persona, writer.kit.persona
    assert planner_.system == "Plan it." and planner_.tools == []  # routes
    assert analyst_.system == "Read the metric." and analyst_.behaviour.name == "gather"
    assert writer_.system.startswith("You are a writer.")
    assert [(t.name, t.delivers) for t in writer_.tools] == [("out", True)]


async def test_a_chain_passes_findings_on_and_the_writer_delivers(tmp_path: Path) -> None:
    result = await run_scenario(
        load_text(CHAIN_ROLES), RunOptions(bus=InProcessBus(), db_path=tmp_path / "r.db")
    )
    assert result.outcomes["success"] == 4
    for messages in result.messages.values():
        by_sender = {m.sender: m for m in messages if m.kind.value == "result"}
        planner = by_sender["planner"].payload["answer"]["claims"]
        analyst = by_sender["analyst"].payload["answer"]["claims"]
        assert planner == [] and analyst == [{"key": "x", "value": 1, "certain": True}]
        assert by_sender["writer"].payload["answer"]["claims"][0]["value"] == 1
    # One backend call reads the metric, one sends the report through the sink.
    assert result.summary["metrics"]["per_trial"]["backend_calls"] == 2.0


DISCUSSION = """
name: talk-order
seed: 3
trials: 2
world:
  metrics: {m.a: 10}
tools:
  q: {kind: metric_store}
discussion: {rounds: 2, decides: [z]}
agents:
  x: {role: researcher, tools: [q], peers: [y, z]}
  y: {role: researcher, tools: [q], peers: [z]}
  z: {role: researcher, tools: [q]}
task:
  prompt: a
  needs:
    - {id: a, tool: q, arg: name, wording: a, value: m.a}
"""


@pytest.mark.parametrize("order", [(0, 1, 2), (1, 0, 2), (2, 1, 0), (1, 2, 0)])
async def test_a_member_takes_its_rounds_in_order_whatever_order_they_became_ready(
    order: tuple[int, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member's round n revises its own round n - 1: the bus may bring a round's inputs
    before the previous round has started or finished (agents in other processes)."""
    log: list[tuple[str, int]] = []

    async def process(self: Agent, trial: int, inputs: list[object], round_: int = 0) -> None:
        log.append(("start", round_))
        for _ in range(3):  # the work takes turns of the loop: others could run meanwhile
            await asyncio.sleep(0)
        log.append(("end", round_))

    monkeypatch.setattr(Agent, "process", process)
    bus = InProcessBus()
    agent = make_agent(
        RunPlan(load_text(DISCUSSION)), "z", "r", await bus.connect("z"), run_key=b"k" * 32
    )
    for round_ in order:
        agent._start(Ready(trial=1, round=round_, inputs=[]))
        await asyncio.sleep(0)
    await asyncio.wait_for(asyncio.gather(*agent._tasks), 2)
    assert log == [("start", 0), ("end", 0), ("start", 1), ("end", 1), ("start", 2), ("end", 2)]
    assert not agent._held and not agent._rounds and not agent._rounds_done


async def test_a_member_forgets_trials_whose_last_round_never_comes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Trials whose last round never arrives (lost on the bus) are remembered at most
    ROUNDS_DONE_KEEP at a time, the ones whose rounds ended most recently: a trial still
    talking (trial 0, its round 1 ends late) is not among the forgotten."""

    async def process(self: Agent, trial: int, inputs: list[object], round_: int = 0) -> None:
        await asyncio.sleep(0)

    monkeypatch.setattr(agent_module, "ROUNDS_DONE_KEEP", 8)
    monkeypatch.setattr(Agent, "process", process)
    bus = InProcessBus()
    agent = make_agent(
        RunPlan(load_text(DISCUSSION)), "z", "r", await bus.connect("z"), run_key=b"k" * 32
    )

    async def round_of(trial: int, round_: int) -> None:
        agent._start(Ready(trial=trial, round=round_, inputs=[]))
        await asyncio.wait_for(asyncio.gather(*agent._tasks), 2)

    for trial in range(6):  # round 0 of trials 0-5
        await round_of(trial, 0)
    await round_of(0, 1)  # trial 0 goes on
    for trial in range(6, 13):  # round 0 only: their next rounds never come
        await round_of(trial, 0)
    assert agent._rounds_done == {0: 1, 6: 0, 7: 0, 8: 0, 9: 0, 10: 0, 11: 0, 12: 0}
    await round_of(0, 2)  # its last round: the trial is over
    assert 0 not in agent._rounds_done


async def test_an_opened_agent_hears_the_roll_call_before_its_loop_runs() -> None:
    """The runner opens its own agents before it calls the roll: the first call then
    reaches them all (one they missed would be called again only after a pause)."""
    bus = InProcessBus()
    plan = RunPlan(load_text(TWO_NEEDS))
    conn = await bus.connect("researcher")
    agent = make_agent(plan, "researcher", "r", conn, run_key=b"k" * 32)
    runner = await bus.connect("runner")
    await agent.open()
    await agent.open()  # once: no second subscription, no second resender
    await runner.publish(topics.control("r", topics.RUNNER), b"roll call")
    assert conn.queue.qsize() == 1
    await agent.endpoint.close()
