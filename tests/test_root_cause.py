"""Root causes from hand-made trials: origins (and what is not one), who dropped the
failure, where contamination started and stopped, and the summary over trials."""

from __future__ import annotations

from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol.envelope import Status, WireError
from errorflow.protocol.events import AgentStart, ModelCall, ToolCallEvent
from errorflow.scoring.genealogy import genealogy
from errorflow.scoring.genealogy_types import StoredLabel
from errorflow.scoring.root_cause import RootCause, root_cause
from errorflow.scoring.root_cause_summary import summarize_causes, summary_rows
from tests.test_genealogy import implicit_chain
from tests.trace_runs import TrialBuilder

BAD = StoredLabel("contaminated", "false claim(s) stated as certain: papers")
HELD = StoredLabel("contained", "failure reported")
CLEAN = StoredLabel("clean", "")


def _labels(b: TrialBuilder, *labels: StoredLabel) -> dict[str, StoredLabel]:
    results = [m for m in b.messages if m.kind.value == "result"]
    return {m.id: lb for m, lb in zip(results, labels, strict=True)}


def _start(b: TrialBuilder, agent: str, inputs: list[str]) -> None:
    b.event(agent, AgentStart(agent=agent, inputs=inputs))
    b.event(agent, ModelCall(agent=agent, input_tokens=1, output_tokens=1, calls=1, final=False))


def _fail(b: TrialBuilder, agent: str, tool: str, call_id: str, code: ErrorCode) -> None:
    b.event(
        agent,
        ToolCallEvent(
            agent=agent,
            tool=tool,
            call_id=call_id,
            args={},
            ok=False,
            code=code,
            attempts=2,
            http_status=503,
        ),
    )


def test_implicit_origin_swallowed_depth_two() -> None:
    b = implicit_chain()
    rc = root_cause(
        genealogy(b.messages, b.events, _labels(b, BAD, BAD), "implicit"), "contaminated", 2
    )
    assert rc is not None and rc.primary is not None
    o = rc.primary
    assert (o.kind, o.agent, o.tool, o.code, o.step, o.call_id) == (
        "tool",
        "researcher",
        "search_papers",
        "permission_denied",
        1,
        "papers#0",
    )
    assert o.said == "swallowed" and o.http_status == 401 and rc.depth == 2
    assert [(d.agent, d.how) for d in rc.dropped] == [
        ("researcher", "swallowed"),
        ("writer", "silent"),
    ]
    assert rc.starts == ("researcher",) and rc.stopped == ()
    assert rc.edges == (("researcher", "writer"), ("writer", "runner"))


def test_contained_first_where_it_was_said_and_stopped_by_a_checker() -> None:
    b = TrialBuilder()
    task = b.task("researcher")
    _start(b, "researcher", ["runner"])
    _fail(b, "researcher", "search_papers", "papers#0", ErrorCode.TRANSIENT)
    own = WireError(code=ErrorCode.TRANSIENT, tool="search_papers", origin="researcher")
    r = b.result(
        "researcher",
        "writer",
        [task],
        failures=["transient"],
        status=Status.FAILED,
        confidence=0.4,
        errors=[own],
    )
    _start(b, "writer", ["researcher"])
    w = b.result(
        "writer",
        "reviewer",
        [r],
        claims=[("papers", ["x"], True)],
        errors=[own.model_copy(update={"hops": 1})],
        confidence=0.4,
    )
    _start(b, "reviewer", ["writer"])
    b.result("reviewer", "runner", [w], flags=["unsupported: papers"], confidence=0.4)
    g = genealogy(b.messages, b.events, _labels(b, HELD, BAD, HELD), "explicit")
    rc = root_cause(g, "contained", 0)
    assert rc is not None
    assert rc.contained_at == ("researcher",)
    assert rc.starts == ("writer",) and rc.stopped == ("reviewer",)
    assert [(d.agent, d.how) for d in rc.dropped] == [("writer", "contaminated")]
    assert rc.primary is not None and rc.primary.said == "reported"


def test_a_failure_caused_upstream_is_secondary_not_an_origin() -> None:
    b = TrialBuilder()
    task = b.task("triage")
    _start(b, "triage", ["runner"])
    _fail(b, "triage", "get_ticket", "product#0", ErrorCode.TIMEOUT)
    t = b.result(
        "triage", "retriever", [task], failures=["timeout"], claims=[("product", None, True)]
    )
    _start(b, "retriever", ["triage"])
    _fail(b, "retriever", "kb", "articles#0", ErrorCode.INVALID_ARGS)
    b.result("retriever", "runner", [t], failures=["invalid_args"])
    rc = root_cause(
        genealogy(b.messages, b.events, _labels(b, BAD, BAD), "implicit"), "contaminated", 2
    )
    assert rc is not None
    assert [o.position for o in rc.origins] == [("triage", "get_ticket", "product#0")]
    assert [o.position for o in rc.secondary] == [("retriever", "kb", "articles#0")]


def test_a_covered_failure_is_still_the_origin() -> None:
    """An agent that answers a failed call's need with a certain claim reports no failure;
    the fault still fired and is where the contamination started."""
    b = TrialBuilder()
    task = b.task("analyst")
    _start(b, "analyst", ["runner"])
    b.event(
        "analyst",
        ToolCallEvent(agent="analyst", tool="kpi", call_id="rev#0", args={}, ok=True, attempts=1),
    )
    _fail(b, "analyst", "kpi", "churn#0", ErrorCode.RATE_LIMIT)
    b.result("analyst", "runner", [task], claims=[("churn", None, True)])
    rc = root_cause(genealogy(b.messages, b.events, _labels(b, BAD), "implicit"), "contaminated", 1)
    assert rc is not None and rc.primary is not None
    assert rc.primary.position == ("analyst", "kpi", "churn#0")
    assert rc.primary.code == "rate_limit" and rc.primary.said == "swallowed"


def test_no_fault_a_false_claim_is_an_answer_origin_and_refusals_are_policy() -> None:
    b = TrialBuilder()
    task = b.task("researcher")
    _start(b, "researcher", ["runner"])
    b.result("researcher", "runner", [task], claims=[("papers", ["made-up"], True)])
    rc = root_cause(genealogy(b.messages, b.events, _labels(b, BAD), "explicit"), "contaminated", 1)
    assert rc is not None and rc.primary is not None
    assert (rc.primary.kind, rc.primary.agent, rc.primary.tool) == ("answer", "researcher", None)

    b = TrialBuilder()
    task = b.task("researcher")
    _start(b, "researcher", ["runner"])
    _fail(b, "researcher", "search_papers", "papers#0", ErrorCode.CIRCUIT_OPEN)
    b.result("researcher", "runner", [task], failures=["circuit_open"], unresolved=["papers"])
    rc = root_cause(genealogy(b.messages, b.events, _labels(b, HELD), "explicit"), "contained", 0)
    assert rc is not None and rc.primary is not None
    assert (rc.primary.kind, rc.primary.code) == ("policy", "circuit_open")


def test_a_success_has_no_root_cause_and_a_root_cause_survives_the_wire() -> None:
    b = implicit_chain()
    g = genealogy(b.messages, b.events, _labels(b, BAD, BAD), "implicit")
    assert root_cause(g, "success", 0) is None
    assert root_cause(g, "bus_fault", 0) is None
    rc = root_cause(g, "contaminated", 2)
    assert rc is not None
    assert RootCause.from_wire(rc.to_wire()) == rc


def test_summary_counts_trials_once_per_place() -> None:
    b = implicit_chain()
    rc = root_cause(
        genealogy(b.messages, b.events, _labels(b, BAD, BAD), "implicit"), "contaminated", 2
    )
    assert rc is not None
    s = summarize_causes([rc, rc, rc])
    assert s["failed"] == 3 and s["contaminated"] == 3 and s["depths"] == {"2": 3}
    assert s["origins"] == [
        {
            "kind": "tool",
            "agent": "researcher",
            "tool": "search_papers",
            "code": "permission_denied",
            "trials": 3,
        }
    ]
    assert s["starts"] == {"researcher": 3}
    assert ("carried by", "researcher → writer", 3) in summary_rows(s)


def test_a_false_claim_from_a_tool_that_answered_wrong_names_the_silent_fault() -> None:
    """The call succeeded, so no failure is on record: the origin is the call a stale
    fault answered, named by the fault's place, not a model's own invention."""
    b = TrialBuilder()
    task = b.task("researcher")
    _start(b, "researcher", ["runner"])
    b.event(
        "researcher",
        ToolCallEvent(
            agent="researcher",
            tool="kpi",
            call_id="revenue#0",
            args={},
            ok=True,
            attempts=1,
            faults=["tools.kpi.faults[0]"],
            silent=["tools.kpi.faults[0]"],
        ),
    )
    b.result("researcher", "runner", [task], claims=[("papers", ["stale"], True)])
    rc = root_cause(genealogy(b.messages, b.events, _labels(b, BAD), "explicit"), "contaminated", 1)
    assert rc is not None and rc.primary is not None
    o = rc.primary
    assert (o.kind, o.agent, o.tool, o.call_id, o.step) == (
        "silent_fault", "researcher", "kpi", "revenue#0", 1,
    )  # fmt: skip
    assert "tools.kpi.faults[0]" in o.detail and "answered ok with a wrong value" in o.detail
    assert RootCause.from_wire(rc.to_wire()) == rc


def test_a_fault_that_fired_but_answered_right_is_no_silent_origin() -> None:
    """A slow call answered within its timeout fired a fault too: not a silent one."""
    b = TrialBuilder()
    task = b.task("researcher")
    _start(b, "researcher", ["runner"])
    slow = ToolCallEvent(
        agent="researcher", tool="kpi", call_id="revenue#0", args={}, ok=True, attempts=1,
        faults=["tools.kpi.faults[0]"],
    )  # fmt: skip
    assert "silent" not in slow.to_payload()  # the wire of most calls is as it was
    b.event("researcher", slow)
    b.result("researcher", "runner", [task], claims=[("papers", ["made-up"], True)])
    rc = root_cause(genealogy(b.messages, b.events, _labels(b, BAD), "explicit"), "contaminated", 1)
    assert rc is not None and rc.primary is not None and rc.primary.kind == "answer"
