"""One trial's model → tools loop, with scripted model and tool gates: every way it ends,
and the loop_stop event each stop produces."""

from __future__ import annotations

from collections.abc import Iterator

from errorflow.agents.loop import LoopOutcome, Persona, TrialLoop
from errorflow.agents.tool_gate import GateOutcome
from errorflow.core.taxonomy import ErrorCode
from errorflow.models.backend import (
    AssistantTurn,
    ModelCallError,
    ModelRequest,
    ModelResponse,
    ObservationTurn,
    TaskTurn,
    ToolCall,
    UpstreamTurn,
)
from errorflow.policies.budget import Budget
from errorflow.policies.classify import Failure
from errorflow.policies.config import BudgetConfig, GuardConfig
from errorflow.policies.loop_guard import LoopGuard
from errorflow.protocol.claims import Claim, FinalAnswer
from errorflow.protocol.events import AgentEvent, LoopStop
from errorflow.protocol.stop import StopReason
from errorflow.scenario.spec.behaviour import BEHAVIOURS

TASK = TaskTurn("find x", [])
ANSWER = FinalAnswer(claims=[Claim("x", 1)])


class ScriptedModel:
    def __init__(self, *responses: ModelResponse | ModelCallError) -> None:
        self.responses: Iterator[ModelResponse | ModelCallError] = iter(responses)
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        response = next(self.responses)
        if isinstance(response, ModelCallError):
            raise response
        return response


class ScriptedTools:
    """Fails the calls whose id is in `failing` with that code; answers the others."""

    def __init__(self, failing: dict[str, ErrorCode] | None = None) -> None:
        self.failing = failing or {}
        self.calls: list[str] = []

    async def call(self, call: ToolCall) -> GateOutcome:
        self.calls.append(call.id)
        code = self.failing.get(call.id)
        if code is None:
            return GateOutcome({"ok": True, "value": 1}, None)
        return GateOutcome({"ok": False, "code": code.value}, Failure(code, call.name, "raw"))


def calls(*ids: str, tool: str = "q") -> ModelResponse:
    return ModelResponse(calls=[ToolCall(i, tool, {"name": "a.x"}) for i in ids])


async def run(
    model: ScriptedModel,
    tools: ScriptedTools,
    *,
    budget: BudgetConfig | None = None,
    guards: GuardConfig | None = None,
    stop_on_unrecoverable: bool = True,
    upstream: list[UpstreamTurn] | None = None,
) -> tuple[LoopOutcome, list[AgentEvent]]:
    events: list[AgentEvent] = []
    b = Budget(budget or BudgetConfig())
    loop = TrialLoop(
        Persona("researcher", "researcher", "be careful", [], BEHAVIOURS["gather"]),
        model,
        tools,
        b,
        LoopGuard(guards or GuardConfig()),
        stop_on_unrecoverable,
        events.append,
    )
    return await loop.run(TASK, upstream or []), events


async def test_a_final_answer_ends_the_loop_without_a_stop() -> None:
    model = ScriptedModel(calls("c1"), ModelResponse(final=ANSWER))
    out, events = await run(model, ScriptedTools())
    assert out.final is ANSWER and out.stopped is None
    assert out.succeeded_tools == {"q"} and out.failures == []
    assert events == []
    # the model saw the task, then its calls and their observations
    assert [type(t) for t in model.requests[1].turns] == [TaskTurn, AssistantTurn, ObservationTurn]
    assert out.task is TASK


async def test_upstream_turns_follow_the_task() -> None:
    upstream = UpstreamTurn("researcher", "ok", 1.0, [], ANSWER)
    model = ScriptedModel(ModelResponse(final=ANSWER))
    await run(model, ScriptedTools(), upstream=[upstream])
    assert model.requests[0].turns == [TASK, upstream]
    assert (model.requests[0].agent, model.requests[0].system) == ("researcher", "be careful")


async def test_an_empty_response_is_an_answer_with_a_flag() -> None:
    out, events = await run(ScriptedModel(ModelResponse()), ScriptedTools())
    assert out.final is not None and out.final.flags == ["empty model response"]
    assert out.stopped is None and events == []


async def test_a_failed_model_call_stops_the_loop() -> None:
    error = ModelCallError(ErrorCode.TRANSIENT, "overloaded", status=529)
    out, events = await run(ScriptedModel(error), ScriptedTools())
    assert out.final is None and out.stopped == StopReason(ErrorCode.MODEL_ERROR)
    assert [(f.code, f.tool, f.http_status) for f in out.failures] == [
        (ErrorCode.TRANSIENT, "model", 529)
    ]
    assert events == [
        LoopStop(agent="researcher", code="model_error", stopped="model_error", steps=1)
    ]


async def test_an_exhausted_budget_stops_before_the_model_is_asked() -> None:
    budget = Budget(BudgetConfig(max_backend_calls_per_task=1))
    budget.charge_backend()
    events: list[AgentEvent] = []
    loop = TrialLoop(
        Persona("a", "researcher", "", [], BEHAVIOURS["gather"]),
        ScriptedModel(),
        ScriptedTools(),
        budget,
        LoopGuard(GuardConfig()),
        True,
        events.append,
    )
    out = await loop.run(TASK, [])
    assert out.stopped == StopReason(ErrorCode.BUDGET_EXHAUSTED)
    assert [(f.code, f.tool, f.raw) for f in out.failures] == [
        (ErrorCode.BUDGET_EXHAUSTED, "budget", "backend_calls_per_task")
    ]
    assert events == [
        LoopStop(agent="a", code="budget_exhausted", stopped="budget_exhausted", steps=1)
    ]


async def test_an_unrecoverable_failure_stops_after_the_steps_calls() -> None:
    tools = ScriptedTools({"c1": ErrorCode.PERMISSION_DENIED})
    out, events = await run(ScriptedModel(calls("c1", "c2")), tools)
    assert tools.calls == ["c1", "c2"]  # asked for together: the step's calls all run
    assert out.stopped == StopReason(ErrorCode.PERMISSION_DENIED, unrecoverable=True)
    assert out.final is None and out.succeeded_tools == {"q"}
    assert events == [
        LoopStop(
            agent="researcher",
            code="permission_denied",
            stopped="unrecoverable:permission_denied",
            steps=1,
        )
    ]


async def test_without_stop_on_unrecoverable_the_loop_goes_on() -> None:
    tools = ScriptedTools({"c1": ErrorCode.PERMISSION_DENIED})
    model = ScriptedModel(calls("c1"), ModelResponse(final=ANSWER))
    out, _ = await run(model, tools, stop_on_unrecoverable=False)
    assert out.stopped is None and out.final is ANSWER
    assert [f.code for f in out.failures] == [ErrorCode.PERMISSION_DENIED]


async def test_the_guard_stops_a_loop_without_progress() -> None:
    # progress starts at 0: a step with only a failure (-1) is no progress
    tools = ScriptedTools({"c1": ErrorCode.NOT_FOUND})
    model = ScriptedModel(calls("c1"), ModelResponse(final=ANSWER))
    out, events = await run(model, tools, guards=GuardConfig(no_progress_steps=1))
    assert out.stopped == StopReason(ErrorCode.NO_PROGRESS) and out.final is None
    assert [f.code for f in out.failures] == [ErrorCode.NOT_FOUND]
    assert events == [
        LoopStop(agent="researcher", code="no_progress", stopped="no_progress", steps=1)
    ]


async def test_progress_counts_every_success_of_the_trial() -> None:
    # Progress is the trial's successes so far minus this step's failures. Step 1: one
    # success (1). Step 2 with two successes and a failure: 3 - 1 = 2, progress (counted
    # per step it would be 1: none); with one success and a failure: 2 - 1 = 1, none.
    tools = ScriptedTools({"c4": ErrorCode.NOT_FOUND})
    model = ScriptedModel(calls("c1"), calls("c2", "c3", "c4"), ModelResponse(final=ANSWER))
    out, _ = await run(model, tools, guards=GuardConfig(no_progress_steps=1))
    assert out.stopped is None and out.final is ANSWER
    tools = ScriptedTools({"c3": ErrorCode.NOT_FOUND})
    model = ScriptedModel(calls("c1"), calls("c2", "c3"), ModelResponse(final=ANSWER))
    out, _ = await run(model, tools, guards=GuardConfig(no_progress_steps=1))
    assert out.stopped == StopReason(ErrorCode.NO_PROGRESS)


async def test_the_step_cap_stops_the_loop() -> None:
    model = ScriptedModel(calls("c1"), calls("c2"), calls("c3"))
    out, events = await run(model, ScriptedTools(), guards=GuardConfig(max_steps=2))
    assert out.stopped == StopReason(ErrorCode.STEP_LIMIT)
    assert len(model.requests) == 2
    assert isinstance(events[0], LoopStop) and events[0].stopped == "step_limit"
