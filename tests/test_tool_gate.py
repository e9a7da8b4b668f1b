"""The tool gate end to end (no agent, no bus): every fault kind, classified, observed
in both styles and traced; the seed-000 presets' backend costs; idempotency; events;
secrets that stay in the trace."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import pytest

from errorflow.agents.tool_gate import GateOutcome, ToolGate
from errorflow.core.redact import redact_obj
from errorflow.core.seeding import stream
from errorflow.core.simclock import SimClock
from errorflow.models.backend import ToolCall
from errorflow.policies.breaker import BreakerBank
from errorflow.policies.budget import Budget
from errorflow.policies.loop_guard import LoopGuard
from errorflow.policies.strategies import build_policy
from errorflow.protocol.events import AgentEvent
from errorflow.scenario.spec.model import Scenario
from errorflow.world.tool_client import ToolClient

ACTIONABLE_KEYS = {"ok", "tool", "code", "message", "retryable", "retry_after_s", "suggestion"}
ARG_KEYS = {"field", "constraint", "received"}

# Only one attempt, so the observation shows the fault itself (not a retry's success).
ONE_SHOT: dict[str, Any] = {
    "retry": {"max_attempts": 1},
    "guards": {"max_identical_calls": 0, "max_consecutive_failures": 0},
}
RAW = {**ONE_SHOT, "error_style": "raw", "tell_class": False}


def scenario(tools: dict[str, Any], seed: int = 0) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "gate-test",
            "seed": seed,
            "world": {
                "metrics": {"fin.rev.2024": 1234, "fin.cost.2024": 99},
                "papers": [{"id": "p1", "title": "Attention", "topic": "transformer"}],
                "documents": {f"d{i}": f"doc {i}" for i in range(8)},
            },
            "tools": tools,
            "agents": {"a": {"role": "researcher", "tools": list(tools)}},
            "task": {
                "prompt": "p",
                "needs": [{"id": "rev", "tool": next(iter(tools)), "wording": "w", "value": "x"}],
            },
        }
    )


def one_tool(kind: str, *faults: dict[str, Any], **spec: Any) -> Scenario:
    return scenario({"t": {"kind": kind, "faults": list(faults), **spec}})


class Harness:
    def __init__(
        self,
        sc: Scenario,
        strategy: str = "resilient",
        overrides: dict[str, Any] | None = None,
        *,
        implicit: bool = False,
        trial: int = 0,
    ) -> None:
        self.policy = build_policy(strategy, overrides)
        self.events: list[AgentEvent] = []
        self.clock = SimClock(0.0)
        self.budget = Budget(self.policy.budget)
        self.client = ToolClient(sc, trial, "a")
        self.gate = ToolGate(
            agent="a",
            trial=trial,
            policy=self.policy,
            client=self.client,
            clock=self.clock,
            rng=stream(sc.seed, trial, "a", "retry"),
            budget=self.budget,
            breakers=BreakerBank(self.policy.breaker),
            guard=LoopGuard(self.policy.guards),
            implicit=implicit,
            emit=self.events.append,
        )
        self._n = 0

    async def call(self, args: dict[str, Any] | str, tool: str = "t") -> GateOutcome:
        self._n += 1
        return await self.gate.call(ToolCall(f"c{self._n}", tool, args))

    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def of(self, type_: str) -> list[dict[str, Any]]:
        """The wire payloads of one event type, without the type and the agent."""
        payloads = [e.to_payload() for e in self.events if e.type == type_]
        assert all(p["agent"] == "a" for p in payloads)  # stamped by the gate
        return [{k: v for k, v in p.items() if k not in ("type", "agent")} for p in payloads]


METRIC = {"name": "fin.rev.2024"}

# kind, tool kind, fault, args, code, http status, exception type, text in the raw error
FAILING: list[tuple[str, str, dict[str, Any], dict[str, Any], str, int | None, str, str]] = [
    (
        "transient-503",
        "metric_store",
        {"kind": "transient", "status": 503},
        METRIC,
        "transient",
        503,
        "HTTPStatusError",
        "HTTP 503",
    ),
    (
        "transient-etimedout",
        "metric_store",
        {"kind": "transient"},
        METRIC,
        "transient",
        None,
        "ConnectTimeout",
        "ETIMEDOUT",
    ),
    (
        "timeout",
        "metric_store",
        {"kind": "timeout"},
        METRIC,
        "timeout",
        None,
        "CallTimeout",
        "did not answer within 30s",
    ),
    (
        "rate-limit",
        "metric_store",
        {"kind": "rate_limit", "retry_after_s": 12},
        METRIC,
        "rate_limit",
        429,
        "HTTPStatusError",
        "Retry-After: 12",
    ),
    (
        "permission-401",
        "metric_store",
        {"kind": "permission", "status": 401},
        METRIC,
        "permission_denied",
        401,
        "HTTPStatusError",
        "401 Unauthorized",
    ),
    (
        "permission-403",
        "metric_store",
        {"kind": "permission"},
        METRIC,
        "permission_denied",
        403,
        "HTTPStatusError",
        "403 Forbidden",
    ),
    (
        "not-found",
        "paper_search",
        {"kind": "not_found"},
        {"query": "transformer"},
        "not_found",
        404,
        "HTTPStatusError",
        "404 Not Found",
    ),
    (
        "bad-args",
        "metric_store",
        {"kind": "bad_args"},
        {"name": "2024年营收"},
        "invalid_args",
        None,
        "UnknownValue",
        "ENOENT",
    ),
]


@pytest.mark.parametrize("case", FAILING, ids=[c[0] for c in FAILING])
async def test_failing_fault_kinds_are_classified_observed_and_traced(case: Any) -> None:
    _, kind, fault, args, code, status, exc_type, raw_text = case
    retryable = code in ("transient", "timeout", "rate_limit")

    act = Harness(one_tool(kind, fault), overrides=ONE_SHOT)
    out = await act.call(args)
    assert out.failure is not None and out.failure.code.value == code
    assert out.failure.http_status == status
    assert out.failure.exc_type == exc_type
    assert out.value is None and not out.swallowed
    obs = out.observation
    assert set(obs) >= ACTIONABLE_KEYS
    assert obs["ok"] is False and obs["tool"] == "t" and obs["code"] == code
    assert obs["retryable"] is retryable
    assert obs["message"] and obs["suggestion"]
    assert "error" not in obs  # the raw text is not in the actionable style
    assert act.budget.backend_calls == 1

    [rec] = act.gate.trace
    assert rec.attempt == 1 and rec.args == args and rec.code == code
    assert rec.exception is not None and exc_type in rec.exception
    assert rec.raw is not None and raw_text in rec.raw
    assert rec.at == act.clock.now > 0

    [ev] = act.of("tool_call")
    assert ev["ok"] is False and ev["code"] == code and ev["attempts"] == 1
    assert ev["http_status"] == status

    raw = Harness(one_tool(kind, fault), overrides=RAW)
    out = await raw.call(args)
    assert out.failure is not None and out.failure.code.value == code
    assert out.observation == {"ok": False, "tool": "t", "error": rec.raw}
    told = Harness(one_tool(kind, fault), overrides={**RAW, "tell_class": True})
    obs = (await told.call(args)).observation
    assert obs["code"] == code and obs["retryable"] is retryable and raw_text in obs["error"]


async def test_timeout_costs_simulated_time_only() -> None:
    h = Harness(one_tool("metric_store", {"kind": "timeout"}, latency_s=0.2))
    started = time.monotonic()
    out = await h.call(METRIC)
    assert time.monotonic() - started < 1.0  # nothing really slept
    assert out.failure is not None and out.failure.code.value == "timeout"
    assert h.budget.backend_calls == 4  # resilient: 4 attempts
    delays = [d["delay_s"] for d in h.of("retry")]
    assert len(delays) == 3
    # Each attempt waits the full per-call timeout (not the tool latency), plus backoff.
    assert h.clock.now == pytest.approx(4 * 30.0 + sum(delays))
    assert [r.waited_s for r in h.gate.trace] == [30.0] * 4
    assert h.budget.sim_seconds == pytest.approx(h.clock.now)


async def test_timeout_uses_the_policy_per_call_timeout() -> None:
    h = Harness(
        one_tool("metric_store", {"kind": "timeout"}),
        overrides={**ONE_SHOT, "retry": {"max_attempts": 1, "per_call_timeout_s": 7.5}},
    )
    out = await h.call(METRIC)
    assert out.failure is not None and out.failure.code.value == "timeout"
    assert h.clock.now == 7.5


async def test_rate_limit_waits_retry_after_when_honoured() -> None:
    fault = {"kind": "rate_limit", "first_n": 1, "retry_after_s": 12}
    h = Harness(one_tool("metric_store", fault, latency_s=0.5))
    out = await h.call(METRIC)
    assert out.failure is None and out.value == 1234
    [retry] = h.of("retry")
    assert retry == {"tool": "t", "attempt": 1, "code": "rate_limit", "delay_s": 12.0}
    assert h.clock.now == pytest.approx(0.5 + 12 + 0.5)
    # classify does not honour Retry-After: it retries at once.
    c = Harness(one_tool("metric_store", fault, latency_s=0.5), "classify")
    assert (await c.call(METRIC)).failure is None
    assert c.of("retry")[0]["delay_s"] == 0.0
    # The observation carries retry_after_s when the call finally fails.
    one = Harness(one_tool("metric_store", {**fault, "first_n": None}), overrides=ONE_SHOT)
    assert (await one.call(METRIC)).observation["retry_after_s"] == 12


async def test_transient_first_n_fails_exactly_the_first_calls() -> None:
    h = Harness(one_tool("metric_store", {"kind": "transient", "status": 503, "first_n": 2}))
    out = await h.call(METRIC)
    assert out.failure is None and out.value == 1234
    assert out.observation == {"ok": True, "tool": "t", "result": 1234}
    assert h.budget.backend_calls == 3
    assert [r.attempt for r in h.gate.trace] == [1, 2]
    assert h.types() == ["retry", "retry", "tool_call"]
    assert h.of("tool_call")[0]["attempts"] == 3
    # The fault is spent: the next call goes through at once.
    await h.call(METRIC)
    assert h.budget.backend_calls == 4


async def test_transient_p_fires_by_draw_and_retries_cure_it() -> None:
    fault = {"kind": "transient", "p": 0.5}
    h = Harness(one_tool("metric_store", fault), "classify")
    outcomes = [await h.call(METRIC) for _ in range(40)]
    failed_attempts = len(h.gate.trace)
    # About half of the attempts failed; most calls were still cured by a retry.
    assert 0.3 < failed_attempts / h.budget.backend_calls < 0.7
    assert h.budget.backend_calls == 40 + failed_attempts - sum(
        1 for o in outcomes if o.failure is not None
    )
    assert sum(o.failure is None for o in outcomes) >= 30


async def test_bad_argument_fails_the_same_way_every_time() -> None:
    sc = one_tool("metric_store", {"kind": "bad_args"})
    h = Harness(sc, "blind-retry")
    first = await h.call({"name": "2024年营收"})
    assert h.budget.backend_calls == 3  # blind retry: every attempt fails identically
    assert {r.raw for r in h.gate.trace} == {"Error: ENOENT: no such metric, open '2024年营收'"}
    again = await h.call({"name": "2024年营收"})
    assert first.failure is not None and again.failure is not None
    assert again.failure.code == first.failure.code
    assert again.observation == first.observation
    # The valid identifier works: the failure is the argument's, not the tool's.
    ok = await h.call({"name": "fin.rev.2024"})
    assert ok.failure is None and ok.value == 1234
    # Actionable: field, what was received, the valid options (seed 000's rewrite).
    act = Harness(sc, overrides=ONE_SHOT)
    obs = (await act.call({"name": "2024年营收"})).observation
    assert obs["field"] == "name" and obs["received"] == "2024年营收"
    assert obs["options"] == ["fin.cost.2024", "fin.rev.2024"]
    assert "fin.rev.2024" in obs["suggestion"]
    assert obs["retryable"] is False


async def test_business_rule_200_with_success_false_is_a_failure() -> None:
    fault = {"kind": "business_rule", "reason": "quarter is closed"}
    h = Harness(one_tool("metric_store", fault), overrides=ONE_SHOT)
    out = await h.call(METRIC)
    assert out.failure is not None and out.failure.code.value == "business_rule"
    assert out.failure.http_status == 200 and out.failure.reason == "quarter is closed"
    obs = out.observation
    assert obs["ok"] is False and obs["code"] == "business_rule" and obs["retryable"] is False
    assert "quarter is closed" in obs["message"]
    [rec] = h.gate.trace
    assert rec.exception is None and rec.code == "business_rule"
    assert rec.body == {"success": False, "reason": "quarter is closed"}
    assert rec.raw is not None
    assert json.loads(rec.raw) == {"success": False, "reason": "quarter is closed"}
    raw = Harness(one_tool("metric_store", fault), overrides=RAW)
    obs = (await raw.call(METRIC)).observation
    assert json.loads(obs["error"]) == {"success": False, "reason": "quarter is closed"}
    # Never retried (not a retryable class) even by classify.
    c = Harness(one_tool("metric_store", fault), "classify")
    await c.call(METRIC)
    assert c.budget.backend_calls == 1


async def test_empty_result_is_a_soft_failure() -> None:
    h = Harness(one_tool("paper_search", {"kind": "empty"}))
    out = await h.call({"query": "transformer"})
    assert out.failure is not None and out.failure.code.value == "empty_result"
    assert out.value == [] and not out.swallowed
    obs = out.observation
    assert obs["ok"] is True and obs["result"] == [] and obs["code"] == "empty_result"
    assert obs["message"] and obs["suggestion"]
    assert h.budget.backend_calls == 1 and h.of("tool_call")[0]["code"] == "empty_result"
    assert h.gate.trace[0].code == "empty_result"
    raw = Harness(one_tool("paper_search", {"kind": "empty"}), overrides=RAW)
    assert (await raw.call({"query": "transformer"})).observation == {
        "ok": True,
        "tool": "t",
        "result": [],
    }
    # Without the fault the same search finds the paper.
    clean = Harness(one_tool("paper_search"))
    assert (await clean.call({"query": "transformer"})).value == ["p1"]


async def test_partial_batch_lists_failed_items() -> None:
    fault = {"kind": "partial", "item_p": 0.5}
    ids = [f"d{i}" for i in range(8)]
    for overrides in (ONE_SHOT, RAW):
        h = Harness(one_tool("batch_fetch", fault), overrides=overrides)
        out = await h.call({"ids": ids})
        assert out.failure is not None and out.failure.code.value == "partial_success"
        failed = sorted(out.failure.item_errors)
        assert failed and len(failed) < len(ids)
        assert set(out.value) | set(failed) == set(ids) and not set(out.value) & set(failed)
        assert out.value == {i: f"doc {i[1:]}" for i in ids if i not in failed}
        obs = out.observation
        assert obs["ok"] is True and obs["code"] == "partial_success"
        assert obs["failed_items"] == failed and obs["result"] == out.value
        assert h.gate.trace[0].code == "partial_success"
        assert set(out.failure.item_errors.values()) == {"HTTP 503 Service Unavailable"}


MALFORMED = [
    ("missing_field", "name", None, True),
    ("wrong_type", "name", 12345, False),
    ("extra_field", "verbose", True, False),
    ("truncated_json", "(arguments)", '{"name": "fi', False),  # half of the JSON text
]


@pytest.mark.parametrize(("mode", "field", "received", "missing"), MALFORMED)
async def test_malformed_call_fails_preflight_without_a_backend_call(
    mode: str, field: str, received: Any, missing: bool
) -> None:
    sc = one_tool("metric_store", {"kind": "malformed_call", "mode": mode})
    h = Harness(sc, overrides=ONE_SHOT)
    out = await h.call(METRIC)
    assert out.failure is not None and out.failure.code.value == "invalid_args"
    assert out.failure.argument is not None and out.failure.argument.missing is missing
    assert h.budget.backend_calls == 0  # the tool never ran
    obs = out.observation
    assert set(obs) >= ACTIONABLE_KEYS | ARG_KEYS
    assert obs["field"] == field and obs["received"] == received
    assert obs["retryable"] is False
    [rec] = h.gate.trace
    assert rec.attempt == 0
    assert rec.exception is not None and rec.exception.startswith("SchemaViolation")
    assert rec.args != METRIC  # the trace keeps the call as it arrived (mangled)
    raw = Harness(sc, overrides=RAW)
    raw_obs = (await raw.call(METRIC)).observation
    assert raw_obs["ok"] is False and raw_obs["error"] == rec.raw


async def test_missing_and_wrong_and_unknown_arguments_read_differently() -> None:
    sc = one_tool("metric_store")
    h = Harness(sc, overrides=ONE_SHOT)
    missing = (await h.call({})).observation
    wrong = (await h.call({"name": 7})).observation
    extra = (await h.call({"name": "fin.rev.2024", "unit": "k"})).observation
    assert missing["received"] is None and "missing" in missing["message"]
    assert "include 'name'" in missing["suggestion"]
    assert wrong["received"] == 7 and "not valid" in wrong["message"]
    assert extra["field"] == "unit" and "not an argument" in extra["message"]
    assert "without 'unit'" in extra["suggestion"] and extra["options"] == ["name"]
    assert len({missing["message"], wrong["message"], extra["message"]}) == 3
    r = Harness(sc, overrides=RAW)
    raw_missing = (await r.call({})).observation["error"]
    raw_wrong = (await r.call({"name": 7})).observation["error"]
    assert "reading 'name'" in raw_missing and raw_missing != raw_wrong
    assert h.budget.backend_calls == 0


async def test_truncated_call_from_the_model_fails_preflight() -> None:
    h = Harness(one_tool("metric_store"), overrides=ONE_SHOT)
    out = await h.call('{"name": "fin.r')
    assert out.failure is not None and out.failure.code.value == "invalid_args"
    assert out.observation["field"] == "(arguments)" and h.budget.backend_calls == 0


async def test_unknown_tool_lists_the_tools() -> None:
    h = Harness(one_tool("metric_store"), overrides=ONE_SHOT)
    out = await h.call(METRIC, tool="nope")
    assert out.failure is not None and out.failure.code.value == "unknown_tool"
    assert h.budget.backend_calls == 0


# -- seed 000's presets: backend calls per logical call ---------------------------

PRESET_CASES = [
    ("transient-first2", {"kind": "transient", "status": 503, "first_n": 2}, METRIC, (3, 1, 3)),
    ("bad-argument", {"kind": "bad_args"}, {"name": "2024年营收"}, (3, 1, 1)),
    ("permission-403", {"kind": "permission", "status": 403}, METRIC, (3, 1, 1)),
]


@pytest.mark.parametrize(
    ("fault", "args", "expected"),
    [c[1:] for c in PRESET_CASES],
    ids=[c[0] for c in PRESET_CASES],
)
async def test_presets_backend_calls(
    fault: dict[str, Any], args: dict[str, Any], expected: tuple[int, int, int]
) -> None:
    got = []
    for strategy in ("blind-retry", "tell-model", "classify"):
        h = Harness(one_tool("metric_store", fault), strategy)
        await h.call(args)
        got.append(h.budget.backend_calls)
        assert h.gate.retries == h.budget.backend_calls - 1
    assert tuple(got) == expected


async def test_tell_model_hands_the_transient_to_the_model() -> None:
    h = Harness(
        one_tool("metric_store", {"kind": "transient", "status": 503, "first_n": 2}), "tell-model"
    )
    out = await h.call(METRIC)
    assert out.failure is not None and out.failure.code.value == "transient"
    assert out.observation == {"ok": False, "tool": "t", "error": "HTTP 503"}


# -- idempotency ----------------------------------------------------------------


def report_sink(*faults: dict[str, Any]) -> Scenario:
    return one_tool("report_sink", *faults, idempotent=False)


REPORT = {"title": "Q3", "body": "numbers"}


async def test_non_idempotent_send_is_retried_once_with_keys_and_sent_once() -> None:
    h = Harness(report_sink({"kind": "transient", "status": 503, "first_n": 2}))
    assert h.policy.retry.idempotency_keys
    out = await h.call(REPORT)
    assert out.failure is None and h.budget.backend_calls == 3
    assert h.client.sent_reports == [{"title": "Q3", "key": "0:a:c1"}]


async def test_non_idempotent_send_is_not_retried_without_keys() -> None:
    h = Harness(
        report_sink({"kind": "transient", "status": 503, "first_n": 2}),
        overrides={"retry": {"idempotency_keys": False}},
    )
    out = await h.call(REPORT)
    assert out.failure is not None and out.failure.code.value == "transient"
    assert h.budget.backend_calls == 1 and h.client.sent_reports == []
    assert h.of("retry") == [] and h.of("retries_exhausted") == []
    # An idempotent tool under the same policy is retried.
    idem = Harness(
        one_tool("report_sink", {"kind": "transient", "status": 503, "first_n": 2}),
        overrides={"retry": {"idempotency_keys": False}},
    )
    assert (await idem.call(REPORT)).failure is None and idem.budget.backend_calls == 3


async def test_timed_out_send_went_out_and_the_key_deduplicates_the_retry() -> None:
    fault = {"kind": "timeout", "first_n": 1}
    h = Harness(report_sink(fault))
    out = await h.call(REPORT)
    assert out.failure is None and h.budget.backend_calls == 2
    assert len(h.client.sent_reports) == 1  # the server sent it once; the retry deduplicated
    # Without keys the gate does not retry; the model re-sending sends twice.
    nk = Harness(report_sink(fault), overrides={"retry": {"idempotency_keys": False}})
    first = await nk.call(REPORT)
    assert first.failure is not None and first.failure.code.value == "timeout"
    assert len(nk.client.sent_reports) == 1
    await nk.call(REPORT)
    assert len(nk.client.sent_reports) == 2


# -- events ------------------------------------------------------------------------


async def test_retry_and_retries_exhausted_events() -> None:
    h = Harness(one_tool("metric_store", {"kind": "transient", "status": 503}), "classify")
    await h.call(METRIC)
    assert h.types() == ["retry", "retry", "retries_exhausted", "tool_call"]
    assert [e["attempt"] for e in h.of("retry")] == [1, 2]
    assert h.of("retries_exhausted") == [
        {"tool": "t", "attempts": 3, "code": "transient", "reason": "attempts_exhausted"}
    ]
    # A class the policy does not retry: no retry events, no "exhausted".
    p = Harness(one_tool("metric_store", {"kind": "permission"}), "classify")
    await p.call(METRIC)
    assert p.types() == ["tool_call"]


async def test_breaker_events_open_and_close_through_the_gate() -> None:
    overrides = {
        "guards": {"max_identical_calls": 0, "max_consecutive_failures": 0},
        "breaker": {"failure_threshold": 2, "cooldown_s": 30},
    }
    h = Harness(one_tool("metric_store", {"kind": "permission", "first_n": 2}), overrides=overrides)
    await h.call(METRIC)
    await h.call(METRIC)
    assert [(e["from"], e["to"], e["reason"]) for e in h.of("breaker")] == [
        ("closed", "open", "failure_threshold")
    ]
    blocked = await h.call(METRIC)
    assert blocked.failure is not None and blocked.failure.code.value == "circuit_open"
    assert blocked.observation["retry_after_s"] == pytest.approx(30.0)
    assert h.budget.backend_calls == 2
    h.clock.now += 30
    ok = await h.call(METRIC)
    assert ok.failure is None
    assert [(e["from"], e["to"], e["reason"]) for e in h.of("breaker")] == [
        ("closed", "open", "failure_threshold"),
        ("open", "half_open", "cooldown_elapsed"),
        ("half_open", "closed", "probes_succeeded"),
    ]


async def test_a_half_open_probe_refused_by_preflight_does_not_hold_the_breaker() -> None:
    """The probe admitted half-open failed argument validation and never reached the
    service: the next call is the probe, not `circuit_open` for ever."""
    overrides = {
        "guards": {"max_identical_calls": 0, "max_consecutive_failures": 0},
        "breaker": {"failure_threshold": 2, "cooldown_s": 30, "half_open_probes": 1},
    }
    h = Harness(one_tool("metric_store", {"kind": "permission", "first_n": 2}), overrides=overrides)
    await h.call(METRIC)
    await h.call(METRIC)
    h.clock.now += 30
    refused = await h.call({"nme": "fin.rev.2024"})  # the probe, mistyped
    assert refused.failure is not None and refused.failure.code.value == "invalid_args"
    ok = await h.call(METRIC)
    assert ok.failure is None, ok.failure
    assert [(e["from"], e["to"]) for e in h.of("breaker")][-1] == ("half_open", "closed")


async def test_guard_event_blocks_without_a_backend_call() -> None:
    h = Harness(one_tool("metric_store", {"kind": "permission"}))
    for _ in range(3):
        await h.call(METRIC)
    out = await h.call({"name": "fin.cost.2024"})
    assert out.failure is not None and out.failure.code.value == "consecutive_failures"
    assert h.budget.backend_calls == 3
    [guard] = h.of("guard")
    assert guard["tool"] == "t" and guard["code"] == "consecutive_failures"


async def test_blocked_calls_do_not_count_as_tool_failures() -> None:
    overrides = {"guards": {"max_identical_calls": 2, "max_consecutive_failures": 2}}
    h = Harness(one_tool("metric_store"), overrides=overrides)
    assert (await h.call(METRIC)).failure is None
    assert (await h.call(METRIC)).failure is None
    for _ in range(3):
        out = await h.call(METRIC)
        assert out.failure is not None and out.failure.code.value == "repeated_call_blocked"
    # The tool never failed: a different call still goes through.
    other = await h.call({"name": "fin.cost.2024"})
    assert other.failure is None and other.value == 99
    assert h.budget.backend_calls == 3


async def test_implicit_propagation_swallows_the_failure() -> None:
    h = Harness(one_tool("paper_search", {"kind": "permission"}), implicit=True)
    out = await h.call({"query": "transformer"})
    assert out.swallowed and out.failure is not None
    assert out.failure.code.value == "permission_denied"
    assert out.observation == {"ok": True, "tool": "t", "result": []}
    # The trace and the event still know.
    assert h.gate.trace and h.of("tool_call")[0]["code"] == "permission_denied"


async def test_same_seed_same_events() -> None:
    async def run(seed: int) -> list[AgentEvent]:
        sc = scenario(
            {"t": {"kind": "metric_store", "faults": [{"kind": "transient", "p": 0.4}]}}, seed=seed
        )
        h = Harness(sc)
        for _ in range(30):
            await h.call(METRIC)
        return h.events

    assert await run(5) == await run(5)
    assert await run(5) != await run(6)


# -- secrets -------------------------------------------------------------------------

SECRETS = [
    "sk-live-4f9a8b7c6d5e4f3a2b1c",
    "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4",
    "postgres://user:pass@db.internal:5432/x",
    "user:pass",
    "/home/alice/.config/creds.json",
]
SECRET_TEXT = (
    "psycopg.OperationalError: connection to postgres://user:pass@db.internal:5432/x failed "
    "(api key sk-live-4f9a8b7c6d5e4f3a2b1c, fallback sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4); "
    "config read from /home/alice/.config/creds.json"
)


def leaked(value: Any) -> list[str]:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return [s for s in SECRETS if s in text]


@pytest.mark.parametrize(
    "fault",
    [
        {"kind": "transient", "status": 503},
        {"kind": "transient"},
        {"kind": "timeout"},
        {"kind": "rate_limit"},
        {"kind": "permission", "status": 401},
        {"kind": "not_found"},
    ],
    ids=lambda f: f"{f['kind']}-{f.get('status', '')}",
)
@pytest.mark.parametrize(
    ("style", "implicit"),
    [("actionable", False), ("raw", False), ("raw-told", False), ("raw", True)],
)
async def test_secrets_stay_in_the_trace(fault: dict[str, Any], style: str, implicit: bool) -> None:
    overrides: dict[str, Any] = {"breaker": {"failure_threshold": 1}}
    if style.startswith("raw"):
        overrides |= {"error_style": "raw", "tell_class": style == "raw-told"}
    sc = one_tool("metric_store", {**fault, "error_text": SECRET_TEXT})
    h = Harness(sc, overrides=overrides, implicit=implicit)
    outcomes = [await h.call(METRIC) for _ in range(3)]  # retries, breaker open, guard
    assert {"tool_call", "breaker"} <= set(h.types())
    assert leaked([r.raw for r in h.gate.trace]) == SECRETS
    for out in outcomes:
        assert leaked(out.observation) == []
    assert leaked([e.to_payload() for e in h.events]) == []
    assert leaked(redact_obj([dataclasses.asdict(r) for r in h.gate.trace])) == []
    if style == "raw" and not implicit:
        # The redacted error still says what happened.
        err = outcomes[0].observation["error"]
        assert "[REDACTED_URL]" in err and "[REDACTED_KEY]" in err and "[PATH]" in err


async def test_secrets_in_arguments_do_not_reach_events_or_observations() -> None:
    h = Harness(one_tool("metric_store"), overrides=ONE_SHOT)
    out = await h.call({"name": "/home/alice/.config/creds.json"})
    assert out.failure is not None and out.failure.code.value == "invalid_args"
    assert h.gate.trace[0].args == {"name": "/home/alice/.config/creds.json"}
    assert leaked(out.observation) == [] and leaked([e.to_payload() for e in h.events]) == []
    assert out.observation["received"] == "[PATH]"


# -- user-defined tools ------------------------------------------------------------------

USER_TOOLS = """
import httpx


def flaky(mode: str) -> dict[str, object]:
    request = httpx.Request("GET", "http://stock.internal/items")
    if mode == "503":
        response = httpx.Response(503, request=request)
        raise httpx.HTTPStatusError("503 Service Unavailable", request=request, response=response)
    if mode == "timeout":
        raise httpx.ConnectTimeout("timed out", request=request)
    if mode == "refused":
        return {"ok": False, "reason": "sku discontinued"}
    return {"ok": True, "units": 3}
"""


def user_scenario(tmp_path: Any) -> Scenario:
    path = tmp_path / "user_tools.py"
    path.write_text(USER_TOOLS)
    return Scenario.model_validate(
        {
            "name": "user-tools",
            "world": {"tables": {"tickets": {"rows": [{"id": "T-1", "priority": "high"}]}}},
            "tools": {
                "py": {
                    "kind": "python",
                    "function": f"{path}:flaky",
                    "business_failure": {"field": "ok", "equals": False},
                },
                "ticket": {"kind": "lookup", "table": "tickets", "args": {"id": {}}},
            },
            "agents": {"a": {"role": "researcher", "tools": ["py", "ticket"]}},
            "task": {
                "prompt": "p",
                "needs": [{"id": "n", "tool": "ticket", "wording": "w", "args": {"id": "T-1"}}],
            },
        }
    )


@pytest.mark.parametrize(
    ("mode", "code", "status"),
    [("503", "transient", 503), ("timeout", "timeout", None), ("refused", "business_rule", 200)],
)
async def test_a_python_tool_is_classified_by_what_its_code_raises_or_returns(
    tmp_path: Any, mode: str, code: str, status: int | None
) -> None:
    h = Harness(user_scenario(tmp_path), overrides=ONE_SHOT)
    out = await h.call({"mode": mode}, tool="py")
    assert out.failure is not None and out.failure.code.value == code
    assert out.failure.http_status == status
    assert h.of("tool_call")[0]["code"] == code


async def test_a_python_tool_answers_and_its_arguments_are_checked_first(tmp_path: Any) -> None:
    h = Harness(user_scenario(tmp_path), overrides=ONE_SHOT)
    ok = await h.call({"mode": "fine"}, tool="py")
    assert ok.failure is None and ok.observation["result"] == {"ok": True, "units": 3}
    bad = await h.call({"mode": 3}, tool="py")  # the type hint says str
    assert bad.failure is not None and bad.failure.code.value == "invalid_args"


async def test_an_unknown_key_lists_the_valid_keys_only_in_the_actionable_style(
    tmp_path: Any,
) -> None:
    sc = user_scenario(tmp_path)
    actionable = await Harness(sc, overrides=ONE_SHOT).call({"id": "T-9"}, tool="ticket")
    assert actionable.failure is not None and actionable.failure.code.value == "not_found"
    assert actionable.observation["options"] == ["T-1"]
    assert actionable.observation["field"] == "id" and "T-1" in actionable.observation["suggestion"]
    raw = await Harness(sc, overrides=RAW).call({"id": "T-9"}, tool="ticket")
    assert raw.failure is not None and raw.failure.code.value == "not_found"
    assert "options" not in raw.observation and "T-1" not in json.dumps(raw.observation)
