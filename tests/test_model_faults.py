"""Injected model faults (`agents.NAME.model.faults`): 429s, 529s, 5xxs and timeouts are
raised as the real backend raises them, fire at their configured rate, go through the
model gate's retries, Retry-After and breaker, and a call they fail for good is scored
as the experiment's failure (contained or contaminated), never as an infra fault."""

from __future__ import annotations

import json
import math
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from errorflow.agents.model_gate import ModelGate
from errorflow.bus.transport import InProcessBus
from errorflow.core.simclock import SimClock
from errorflow.core.taxonomy import ErrorCode
from errorflow.faults.model import (
    ModelCallFaults,
    ModelFault,
    Struck,
    model_fault_fires,
)
from errorflow.models.backend import (
    ModelCallError,
    ModelRequest,
    ModelResponse,
    Usage,
)
from errorflow.models.backends import BackendFactory
from errorflow.models.model_faults import FaultyModel, InjectedModelError
from errorflow.policies.budget import Budget
from errorflow.policies.strategies import build_policy
from errorflow.protocol.events import (
    AgentEvent,
    ModelCall,
    ModelError,
    ModelFaultFired,
    parse_event,
)
from errorflow.runtime.runner import RunOptions, RunResult, run_scenario
from errorflow.scenario.overrides import apply
from errorflow.scenario.spec import identity
from errorflow.scenario.spec.model import ModelSpec, Scenario
from errorflow.scoring.score import Outcome
from tests.conftest import scenario

KINDS = ("rate_limit", "overloaded", "server_error", "timeout")


def sigma3(n: int, p: float) -> float:
    return 3 * math.sqrt(n * p * (1 - p))


# -- the scenario block -----------------------------------------------------------------


def test_a_fault_takes_either_first_n_or_p_and_a_status_its_kind_can_answer() -> None:
    ModelFault(kind="server_error", status=503, p=0.1)
    ModelFault(kind="timeout", status=408)
    for bad in (
        {"kind": "overloaded", "p": 0.1, "first_n": 2},
        {"kind": "rate_limit", "status": 503},
        {"kind": "overloaded", "status": 500},
        {"kind": "server_error", "status": 429},
        {"kind": "timeout", "status": 504},
        {"kind": "timeout", "retry_after_s": 1},
        {"kind": "overloaded", "duration_s": 5},
        {"kind": "flaky"},
    ):
        with pytest.raises(ValidationError):
            ModelFault.model_validate(bad)


def test_old_scenarios_dump_and_hash_as_before_and_faults_are_kept_when_given() -> None:
    s = scenario("contamination")
    assert "faults" not in s.agents["writer"].model.model_dump()
    before = identity.sha(s)
    assert identity.sha(Scenario.model_validate(s.model_dump())) == before
    faulty = apply(s, {"agents.writer.model.faults": [{"kind": "overloaded", "p": 0.2}]})
    dumped = faulty.agents["writer"].model.model_dump()
    assert dumped["faults"][0]["kind"] == "overloaded" and identity.sha(faulty) != before


# -- the errors: as the real backend raises them -------------------------------------------


@pytest.mark.parametrize(
    ("fault", "code", "status"),
    [
        (ModelFault(kind="rate_limit", retry_after_s=7), ErrorCode.RATE_LIMIT, 429),
        (ModelFault(kind="overloaded"), ErrorCode.TRANSIENT, 529),
        (ModelFault(kind="server_error", status=503), ErrorCode.TRANSIENT, 503),
        (ModelFault(kind="timeout"), ErrorCode.TIMEOUT, None),
        (ModelFault(kind="timeout", status=408), ErrorCode.TIMEOUT, 408),
    ],
)
def test_an_injected_error_is_the_real_backends_for_the_same_answer(
    fault: ModelFault, code: ErrorCode, status: int | None
) -> None:
    from errorflow.models.sdk.failures import classify_status

    err = InjectedModelError(Struck(fault, "agents.w.model.faults[0]", call=0, attempt=1))
    assert isinstance(err, ModelCallError)
    assert (err.code, err.status, err.infrastructure) == (code, status, None)
    assert err.retry_after_s == fault.retry_after_s
    if status is not None:
        assert classify_status(status) is code  # the real backend's classification
        assert f"HTTP {status}" in str(err)
    assert str(err).startswith("injected (agents.w.model.faults[0]): Anthropic API ")


# -- rates ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_fires_at_its_rate_over_many_attempts(kind: str) -> None:
    p, n, seed = 0.1, 4000, KINDS.index(kind)  # a sample of its own for each kind
    fault = ModelFault.model_validate({"kind": kind, "p": p})
    hits = sum(
        model_fault_fires(fault, seed=seed, trial=t, owner="w", index=0, call=c, attempt=a, nth=0)
        for t in range(200)
        for c in range(5)
        for a in range(1, 5)
    )
    assert abs(hits - n * p) <= sigma3(n, p), hits


def test_draws_depend_only_on_where_they_are() -> None:
    fault = ModelFault(kind="overloaded", p=0.5)
    where = {"seed": 1, "trial": 3, "owner": "w", "index": 0, "call": 2, "attempt": 1, "nth": 9}
    first = [model_fault_fires(fault, **{**where, "trial": t}) for t in range(50)]  # type: ignore[arg-type]
    again = [model_fault_fires(fault, **{**where, "trial": t}) for t in range(50)]  # type: ignore[arg-type]
    assert first == again and 10 < sum(first) < 40
    other = [model_fault_fires(fault, **{**where, "trial": t, "owner": "r"}) for t in range(50)]  # type: ignore[arg-type]
    assert other != first


# -- through the model gate ----------------------------------------------------------------

REQUEST = ModelRequest("writer", "writer", "system", [], [])


class Answers:
    """A backend that always answers (and counts what reached it)."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        return ModelResponse(usage=Usage(10, 5), stop_reason="end_turn")


class Gate:
    def __init__(self, *faults: dict[str, Any], overrides: dict[str, Any] | None = None) -> None:
        spec = ModelSpec.model_validate({"faults": list(faults)})
        self.inner = Answers()
        self.faulty = FaultyModel(
            self.inner, ModelCallFaults.of(spec.faults, [], "writer", 3), 0, "writer"
        )
        self.events: list[AgentEvent] = []
        policy = build_policy("resilient", overrides)
        self.clock = SimClock(0.0)
        self.gate = ModelGate(
            self.faulty,
            policy,
            self.clock,
            random.Random(1),
            Budget(policy.budget),
            self.events.append,
            agent="writer",
        )

    def of(self, kind: type[AgentEvent]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


async def test_a_fault_on_the_first_attempts_is_retried_and_the_call_answers() -> None:
    g = Gate({"kind": "overloaded", "first_n": 2})
    await g.gate.complete(REQUEST)
    assert [e.type for e in g.events] == [
        "model_fault", "model_error", "model_fault", "model_error", "model_call",
    ]  # fmt: skip
    fired = g.of(ModelFaultFired)
    assert [(f.fault, f.kind, f.status, f.call, f.attempt) for f in fired] == [
        ("agents.writer.model.faults[0]", "overloaded", 529, 0, 1),
        ("agents.writer.model.faults[0]", "overloaded", 529, 0, 2),
    ]
    assert all(e.retry and e.code is ErrorCode.TRANSIENT for e in g.of(ModelError))
    assert g.inner.calls == 1 and g.gate.calls == 3 and g.gate.retries == 2
    await g.gate.complete(ModelRequest("writer", "writer", "system", [], []))  # call 1
    assert g.faulty.calls == 2 and len(g.of(ModelFaultFired)) == 2  # first_n: of the trial


async def test_a_rate_limit_waits_its_retry_after_and_a_timeout_its_duration() -> None:
    g = Gate({"kind": "rate_limit", "first_n": 1, "retry_after_s": 7})
    await g.gate.complete(REQUEST)
    assert g.of(ModelError)[0].delay_s == 7 and g.clock.now == 7
    t = Gate({"kind": "timeout", "first_n": 1, "duration_s": 12})
    await t.gate.complete(REQUEST)
    error = t.of(ModelError)[0]
    assert error.code is ErrorCode.TIMEOUT and error.status is None
    assert t.clock.now == pytest.approx(12 + error.delay_s)


async def test_a_fault_on_every_attempt_runs_out_of_retries_and_opens_the_breaker() -> None:
    breaker = {"model_breaker": {"enabled": True, "failure_threshold": 2, "cooldown_s": 60}}
    g = Gate({"kind": "overloaded"}, overrides=breaker)
    for _ in range(2):
        with pytest.raises(ModelCallError) as failed:
            await g.gate.complete(ModelRequest("writer", "writer", "s", [], []))
        assert failed.value.code is ErrorCode.TRANSIENT and failed.value.infrastructure is None
    with pytest.raises(ModelCallError) as refused:
        await g.gate.complete(REQUEST)
    assert refused.value.code is ErrorCode.CIRCUIT_OPEN
    assert g.inner.calls == 0 and len(g.of(ModelFaultFired)) == 8  # 2 calls x 4 attempts
    assert [(e.frm, e.to) for e in g.events if e.type == "breaker"] == [("closed", "open")]


async def test_the_backend_factory_wraps_only_an_agent_with_faults() -> None:
    s = apply(scenario("contamination"), {"agents.writer.model.faults": [{"kind": "overloaded"}]})
    plain = BackendFactory(s.agents["researcher"].model, s.seed, "researcher", scenario=s)
    faulty = BackendFactory(s.agents["writer"].model, s.seed, "writer", scenario=s)
    assert not isinstance(plain.for_trial(0), FaultyModel)
    wrapped = faulty.for_trial(3, "writer@r1")
    assert isinstance(wrapped, FaultyModel) and (wrapped.trial, wrapped.owner) == (3, "writer@r1")


# -- runs ------------------------------------------------------------------------------------


def clean(trials: int, **update: object) -> Scenario:
    """The contamination scenario without its tool fault: every trial succeeds."""
    return apply(
        scenario("contamination", trials=trials, **update), {"tools.search_papers.faults": []}
    )


async def run(s: Scenario, db: Path) -> RunResult:
    return await run_scenario(s, RunOptions(bus=InProcessBus(), db_path=db))


def stored_events(db: Path, run_id: str) -> list[Any]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT envelope FROM events WHERE run_id = ?", (run_id,)).fetchall()
    return [parse_event(json.loads(raw)["payload"]) for (raw,) in rows]


@pytest.mark.parametrize("propagation", ["explicit", "implicit"])
async def test_a_529_that_exhausts_retries_is_an_injected_failure_not_infra(
    tmp_path: Path, propagation: str
) -> None:
    # A writer that always heeds what upstream reports (its profile sometimes does not).
    s = apply(
        clean(6, propagation=propagation),
        {
            "agents.researcher.model.faults": [{"kind": "overloaded"}],
            "agents.writer.model.params": {"p_heed_upstream": 1.0},
        },
    )
    result = await run(s, tmp_path / "x.db")
    assert result.infra_faults == 0
    expected = Outcome.CONTAINED if propagation == "explicit" else Outcome.CONTAMINATED
    assert {sc.outcome for sc in result.scores} == {expected}
    events = stored_events(tmp_path / "x.db", result.run_id)
    fired = [e for e in events if isinstance(e, ModelFaultFired)]
    errors = [e for e in events if isinstance(e, ModelError)]
    assert len(fired) == len(errors) == 6 * 4  # every attempt of the researcher's one call
    assert {e.retry for e in errors[3::4]} == {False}  # the 4th attempt is the last
    finals = [m for ms in result.messages.values() for m in ms if m.recipient == "runner"]
    if propagation == "explicit":  # the writer says what failed upstream
        assert all(
            any(e.code is ErrorCode.TRANSIENT and e.origin == "researcher" for e in m.errors)
            for m in finals
        )


async def test_faults_that_retries_recover_leave_the_outcomes_of_the_fault_free_run(
    tmp_path: Path,
) -> None:
    s = clean(10)
    faulty = apply(s, {"agents.writer.model.faults": [{"kind": "rate_limit", "first_n": 3}]})
    base, hit = await run(s, tmp_path / "a.db"), await run(faulty, tmp_path / "b.db")
    assert [sc.outcome for sc in hit.scores] == [sc.outcome for sc in base.scores]
    assert {sc.outcome for sc in hit.scores} == {Outcome.SUCCESS}
    assert hit.summary["metrics"] != base.summary["metrics"]  # retries cost something
    assert sum(sc.costs.retries for sc in hit.scores) == 3 * 10


async def test_a_run_counts_each_model_fault_by_its_place_and_the_attempts_it_failed(
    tmp_path: Path,
) -> None:
    """Two faults of one kind on one model stay apart, and each counts the attempts it
    failed (the stored `model_fault` events), not the messages of the trials it struck."""
    faults = [
        {"kind": "server_error", "status": 502, "p": 0.2},
        {"kind": "server_error", "status": 503, "first_n": 1},
    ]
    s = apply(clean(20), {"agents.researcher.model.faults": faults})
    result = await run(s, tmp_path / "m.db")
    with sqlite3.connect(tmp_path / "m.db") as conn:
        rows = conn.execute("SELECT trial, envelope FROM events WHERE type = 'model_fault'")
        events = [(t, parse_event(json.loads(raw)["payload"])) for t, raw in rows]
    expected: dict[str, dict[str, object]] = {}
    for i in range(2):
        place = f"agents.researcher.model.faults[{i}]"
        fired = [t for t, e in events if isinstance(e, ModelFaultFired) and e.fault == place]
        struck = set(fired)
        expected[place] = {
            "fired": len(struck),
            "never": 20 - len(struck),
            "times": len(fired),
            "kind": "server_error",
        }
    counts = result.summary["model_faults"]
    assert counts == expected
    first = counts["agents.researcher.model.faults[0]"]
    assert first["times"] > first["fired"] > 0  # attempts, some trials struck twice
    assert "agent_faults" not in result.summary  # a model fault is not an agent's own


async def test_a_managers_dispatch_round_counts_its_model_faults_too(tmp_path: Path) -> None:
    """A manager's dispatch goes out as tasks, its gathering as a result: the attempts
    a fault failed in both rounds are counted, as many as the stored events say."""
    s = apply(
        scenario("manager-workers", trials=5),
        {"agents.lead.model.faults": [{"kind": "overloaded", "first_n": 1}]},
    )
    result = await run(s, tmp_path / "d.db")
    with sqlite3.connect(tmp_path / "d.db") as conn:
        query = "SELECT COUNT(*) FROM events WHERE type = 'model_fault'"
        (events,) = conn.execute(query).fetchone()
    counted = result.summary["model_faults"]["agents.lead.model.faults[0]"]
    assert counted["times"] == events == 10, (counted, events)  # two rounds, five trials


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
async def test_each_kind_fires_at_its_rate_in_a_run(tmp_path: Path, kind: str) -> None:
    """Fired attempts / all attempts of the researcher's model, from the stored events."""
    p = 0.2
    s = clean(300, seed=10 + KINDS.index(kind))  # a sample of its own for each kind
    s = apply(s, {"agents.researcher.model.faults": [{"kind": kind, "p": p}]})
    result = await run(s, tmp_path / "r.db")
    events = [e for e in stored_events(tmp_path / "r.db", result.run_id) if e is not None]
    mine = [e for e in events if getattr(e, "agent", None) == "researcher"]
    fired = sum(isinstance(e, ModelFaultFired) for e in mine)
    attempts = sum(isinstance(e, ModelCall | ModelError) for e in mine)
    assert fired == sum(isinstance(e, ModelError) for e in mine)  # no other model failure
    assert attempts > 700 and abs(fired - attempts * p) <= sigma3(attempts, p), (fired, attempts)
    assert result.infra_faults == 0
