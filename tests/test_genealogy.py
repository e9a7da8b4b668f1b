"""The genealogy of a trial, from hand-made rows: provenance, invocations, steps, what a
failure reached and how each message dealt with it."""

from __future__ import annotations

import itertools

import pytest

from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol.envelope import Status, WireError
from errorflow.protocol.events import (
    AgentStart,
    LoopStop,
    ModelCall,
    RetryScheduled,
    ToolCallEvent,
)
from errorflow.scoring.genealogy import genealogy
from errorflow.scoring.genealogy_types import StoredLabel
from errorflow.scoring.labels import silent
from errorflow.scoring.score import (
    RECOVERED,
    Label,
    Truth,
    label_message,
)
from tests.conftest import scenario
from tests.trace_runs import TrialBuilder

PD = ErrorCode.PERMISSION_DENIED


def _turn(b: TrialBuilder, agent: str, calls: int, final: bool = False) -> None:
    b.event(
        agent, ModelCall(agent=agent, input_tokens=10, output_tokens=5, calls=calls, final=final)
    )


def _call(
    b: TrialBuilder,
    agent: str,
    call_id: str,
    ok: bool,
    code: ErrorCode | None,
    tool: str = "search_papers",
    **kw: object,
) -> None:
    b.event(
        agent,
        ToolCallEvent(
            agent=agent,
            tool=tool,
            call_id=call_id,
            args={"q": "x"},
            ok=ok,
            code=code,
            attempts=1,
            **kw,
        ),
    )  # type: ignore[arg-type]


def implicit_chain() -> TrialBuilder:
    """contamination, implicit: the search fails, the researcher says ok, the writer too."""
    b = TrialBuilder()
    task = b.task("researcher")
    b.event("researcher", AgentStart(agent="researcher", inputs=["runner"]))
    _turn(b, "researcher", 1)
    _call(b, "researcher", "papers#0", False, PD, http_status=401, error="HTTP 401 key=[R]")
    b.event(
        "researcher",
        LoopStop(
            agent="researcher",
            code="permission_denied",
            stopped="unrecoverable:permission_denied",
            steps=1,
        ),
    )
    r = b.result(
        "researcher",
        "writer",
        [task],
        claims=[("papers", None, True)],
        failures=["permission_denied"],
    )
    b.event("writer", AgentStart(agent="writer", inputs=["researcher"]))
    _turn(b, "writer", 0, final=True)
    b.result("writer", "runner", [r], claims=[("papers", ["made-up"], True)])
    return b


def test_provenance_invocations_and_steps() -> None:
    b = implicit_chain()
    g = genealogy(b.messages, b.events, {}, "implicit")
    assert [(m.sender, m.recipient, m.kind) for m in g.messages] == [
        ("runner", "researcher", "task"),
        ("researcher", "writer", "result"),
        ("writer", "runner", "result"),
    ]
    assert [(i.agent, i.level, i.steps) for i in g.invocations] == [
        ("researcher", 0, 1),
        ("writer", 1, 1),
    ]
    call = g.invocations[0].tool_calls[0]
    assert (call.step, call.tool, call.call_id, call.code, call.http_status) == (
        1,
        "search_papers",
        "papers#0",
        "permission_denied",
        401,
    )
    assert "swallowed by the tool wrapper" in call.shown
    assert [d.kind for d in g.timeline] == ["model_call", "tool_call", "loop_stop", "model_call"]
    assert g.messages[-1].final and not g.messages[1].final
    shown = g.invocations[1].shown
    assert [s.source for s in shown] == ["researcher"] and "conf 1.00" in shown[0].text


def test_implicit_failure_swallowed_then_passed_on_silently() -> None:
    b = implicit_chain()
    g = genealogy(b.messages, b.events, {}, "implicit")
    researcher, writer = g.messages[1], g.messages[2]
    assert researcher.touched and researcher.reached and researcher.handling == "swallowed"
    assert writer.touched and writer.handling == "silent"
    assert researcher.own_failures == ("permission_denied",)


def test_explicit_errors_reported_then_carried() -> None:
    b = TrialBuilder()
    task = b.task("researcher")
    b.event("researcher", AgentStart(agent="researcher", inputs=["runner"]))
    _turn(b, "researcher", 1)
    _call(b, "researcher", "papers#0", False, PD)
    own = WireError(code=PD, tool="search_papers", origin="researcher", hops=0)
    r = b.result(
        "researcher",
        "writer",
        [task],
        failures=["permission_denied"],
        status=Status.FAILED,
        confidence=0.4,
        errors=[own],
        unresolved=["papers"],
    )
    b.event("writer", AgentStart(agent="writer", inputs=["researcher"]))
    _turn(b, "writer", 0, final=True)
    b.result(
        "writer",
        "runner",
        [r],
        status=Status.FAILED,
        confidence=0.2,
        errors=[own.model_copy(update={"hops": 1})],
        flags=["papers: upstream failure"],
    )
    g = genealogy(b.messages, b.events, {}, "explicit")
    assert [m.handling for m in g.messages[1:]] == ["reported", "carried"]
    assert [e.hops for m in g.messages[1:] for e in m.errors] == [0, 1]
    assert g.messages[2].flags == ("papers: upstream failure",)
    assert "the error permission_denied" in g.invocations[0].tool_calls[0].shown


def test_a_failed_call_redone_for_the_same_need_is_healed() -> None:
    b = TrialBuilder()
    task = b.task("researcher")
    b.event("researcher", AgentStart(agent="researcher", inputs=["runner"]))
    _turn(b, "researcher", 2)
    _call(b, "researcher", "papers#0", False, ErrorCode.NOT_FOUND)
    _call(b, "researcher", "other#0", False, ErrorCode.TRANSIENT)
    _turn(b, "researcher", 1)
    _call(b, "researcher", "papers#1", True, None)
    b.result("researcher", "runner", [task], claims=[("papers", ["a"], True)])
    g = genealogy(b.messages, b.events, {}, "implicit")
    failures = g.invocations[0].failures
    assert [(f.call_id, f.step, f.healed) for f in failures] == [
        ("papers#0", 1, True),
        ("other#0", 1, False),
    ]
    # the failure it did not undo reached its message, though it reports none
    assert g.messages[1].reached and not g.messages[1].touched
    assert g.messages[1].handling == "swallowed"


def test_policy_decisions_are_in_the_timeline_with_their_step() -> None:
    b = TrialBuilder()
    task = b.task("researcher")
    b.event("researcher", AgentStart(agent="researcher", inputs=["runner"]))
    _turn(b, "researcher", 1)
    b.event(
        "researcher",
        RetryScheduled(
            agent="researcher",
            tool="search_papers",
            attempt=1,
            code=ErrorCode.TRANSIENT,
            delay_s=0.25,
        ),
    )
    _call(b, "researcher", "papers#0", True, None)
    _turn(b, "researcher", 0, final=True)
    b.result("researcher", "runner", [task], claims=[("papers", ["a"], True)])
    g = genealogy(b.messages, b.events, {}, "explicit")
    retry = next(d for d in g.timeline if d.kind == "retry")
    assert (retry.step, retry.delay_s, retry.code) == (1, 0.25, "transient")
    assert "retry after 0.25s backoff" in retry.text
    assert g.invocations[0].steps == 2


def test_rows_in_any_order_give_the_same_genealogy() -> None:
    b = implicit_chain()
    labels = {b.messages[1].id: StoredLabel("contaminated", "false claim(s)")}
    one = genealogy(b.messages, b.events, labels, "implicit")
    other = genealogy(b.messages[::-1], b.events[::-1], labels, "implicit")
    assert one == other
    assert one.messages[1].label == "contaminated" and one.messages[1].reason == "false claim(s)"


def test_work_without_events_is_said() -> None:
    b = implicit_chain()
    events = [e for e in b.events if e.sender != "writer"]
    g = genealogy(b.messages, events, {}, "implicit")
    assert not g.invocations[1].events
    assert any("no events stored" in n and "writer" in n for n in g.notes)


@pytest.mark.parametrize(
    ("status", "confidence", "flags", "certain"),
    list(itertools.product([Status.OK, Status.FAILED], [1.0, 0.6], [[], ["gap"]], [True, False])),
)
def test_silent_is_what_the_scorer_calls_saying_nothing(
    status: Status, confidence: float, flags: list[str], certain: bool
) -> None:
    """A touched message is `upstream failure dropped silently` exactly when silent,
    unless its answer is whole and true: then the failure was repaired (`recovered`)."""
    b = TrialBuilder()
    task = b.task("researcher")
    truth = Truth(scenario("contamination"))
    env = b.result(
        "researcher",
        "runner",
        [task],
        status=status,
        confidence=confidence,
        flags=flags,
        claims=[("papers", truth.values["papers"], certain)],
    )
    label = label_message(env, truth, touched=True)
    dropped = label.label is Label.CONTAMINATED and "silently" in label.reason
    recovered = label.label is Label.CLEAN and label.reason == RECOVERED
    assert (dropped or recovered) == silent(env)
    assert recovered == (silent(env) and certain)  # the one need answered, and true
