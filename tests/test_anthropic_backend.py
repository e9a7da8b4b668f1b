"""AnthropicBackend against a real local HTTP server, with the real SDK as client."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from datetime import UTC
from types import SimpleNamespace
from typing import Any

import pytest
from fake_anthropic import (
    GARBAGE,
    FakeAnthropic,
    Reply,
    error_body,
    message,
    text,
    tool_use,
    unused_url,
)
from fake_time import FakeTime

from errorflow.core.taxonomy import ErrorCode, is_retryable
from errorflow.models.anthropic.backend import API_KEY_ENV, AnthropicBackend, api_key_from_env
from errorflow.models.anthropic.reply import parse_message
from errorflow.models.anthropic.request import (
    SUBMIT_TOOL,
    TemperaturePolicy,
    WireFormat,
    render_messages,
    render_tools,
)
from errorflow.models.backend import (
    AssistantTurn,
    InfrastructureError,
    ModelCallError,
    ModelRequest,
    NeedView,
    ObservationTurn,
    TaskTurn,
    ToolCall,
    ToolDef,
    UpstreamTurn,
)
from errorflow.models.model_usage import CachedUsage
from errorflow.models.rate_limit import RateLimiter
from errorflow.models.sdk.failures import parse_retry_after
from errorflow.protocol.claims import Claim, FinalAnswer
from errorflow.scenario.spec.model import ModelSpec

KEY = "sk-ant-test-SECRETKEY123456"

QUERY_METRIC = ToolDef(
    name="query_metric",
    description="Read one metric by name.",
    input_schema={
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    },
)

TASK = TaskTurn(
    prompt="Report the CPU load and the error rate.",
    needs=[
        NeedView(
            id="cpu",
            tool="query_metric",
            arg="name",
            wording="the CPU load",
            identifier="cpu_load",
        ),
        NeedView(
            id="errors",
            tool="query_metric",
            arg="name",
            wording="the error rate",
            identifier=None,
        ),
    ],
)


def req(*turns: Any, tools: list[ToolDef] | None = None) -> ModelRequest:
    return ModelRequest(
        agent="researcher",
        role="researcher",
        system="You are the researcher.",
        turns=list(turns) if turns else [TASK],
        tools=[QUERY_METRIC] if tools is None else tools,
    )


SUBMIT_INPUT = {
    "claims": [
        {"key": "cpu", "value": 0.42, "certain": True},
        {"key": "errors", "value": None, "certain": False},
    ],
    "abstained": False,
    "flags": ["tool_error"],
    "unresolved": ["errors"],
    "text": "CPU load is 0.42; the error rate could not be read.",
}


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def clock() -> FakeTime:
    return FakeTime()


@pytest.fixture
async def backend(fake: FakeAnthropic, clock: FakeTime) -> AsyncIterator[AnthropicBackend]:
    spec = ModelSpec(
        backend="anthropic", model="claude-test", base_url=fake.url, max_tokens=512, temperature=0.2
    )
    limiter = RateLimiter(clock=clock.clock, sleep=clock.sleep, wall=clock.wall)
    b = AnthropicBackend(spec, KEY, timeout_s=5.0, limiter=limiter)
    yield b
    await b.aclose()


def auth_value(headers: dict[str, str]) -> str:
    """The credential the SDK sent (x-api-key, or a bearer Authorization header)."""
    if "x-api-key" in headers:
        return headers["x-api-key"]
    return headers.get("authorization", "").removeprefix("Bearer ")


# ------------------------------------------------------------------ tool-use loop


async def test_tool_use_loop_over_two_calls(fake: FakeAnthropic, backend: AnthropicBackend) -> None:
    fake.script(
        Reply(
            body=message(
                [
                    text("Let me look these up."),
                    tool_use("toolu_1", "query_metric", {"name": "cpu_load"}),
                    tool_use("toolu_2", "query_metric", {"name": "error_rate"}),
                ],
                "tool_use",
                input_tokens=120,
                output_tokens=30,
            )
        ),
        Reply(
            body=message(
                [tool_use("toolu_3", SUBMIT_TOOL, SUBMIT_INPUT)],
                "tool_use",
                input_tokens=200,
                output_tokens=60,
            )
        ),
    )

    first = await backend.complete(req())
    assert first.final is None
    assert first.stop_reason == "tool_use"
    assert first.calls == [
        ToolCall(id="toolu_1", name="query_metric", arguments={"name": "cpu_load"}),
        ToolCall(id="toolu_2", name="query_metric", arguments={"name": "error_rate"}),
    ]
    assert (first.usage.input_tokens, first.usage.output_tokens) == (120, 30)

    # what the server received on the first call
    sent = fake.received[0]
    assert sent.path.endswith("/v1/messages")
    assert auth_value(sent.headers) == KEY
    assert "anthropic-version" in sent.headers
    body = sent.body
    assert body["model"] == "claude-test"
    assert body["max_tokens"] == 512
    assert body["temperature"] == 0.2  # a server other than Anthropic's takes it
    [system] = body["system"]
    assert system["text"].startswith("You are the researcher.")
    assert SUBMIT_TOOL in system["text"]
    assert system["cache_control"] == {"type": "ephemeral"}
    assert [t.get("cache_control") for t in body["tools"]] == [None, {"type": "ephemeral"}]
    tools = {t["name"]: t for t in body["tools"]}
    assert set(tools) == {"query_metric", SUBMIT_TOOL}
    assert tools["query_metric"]["input_schema"] == QUERY_METRIC.input_schema
    assert tools["query_metric"]["description"] == QUERY_METRIC.description
    submit_props = tools[SUBMIT_TOOL]["input_schema"]["properties"]
    assert set(submit_props) == {"claims", "abstained", "flags", "unresolved", "text", "revise"}
    assert [m["role"] for m in body["messages"]] == ["user"]
    task_text = body["messages"][0]["content"][0]["text"]
    assert task_text.startswith("Report the CPU load and the error rate.")
    assert '- key "cpu": the CPU load (tool query_metric, argument name = cpu_load)' in task_text
    assert '- key "errors": the error rate' in task_text
    assert "error_rate" not in task_text  # not given: the model must guess it

    error_obs = {"ok": False, "error": {"code": "not_found", "message": "no metric error_rate"}}
    ok_obs = {"ok": True, "data": {"name": "cpu_load", "value": 0.42}}
    second = await backend.complete(
        req(
            TASK,
            AssistantTurn(calls=first.calls, text="Let me look these up."),
            ObservationTurn(call_id="toolu_1", tool="query_metric", content=ok_obs),
            ObservationTurn(call_id="toolu_2", tool="query_metric", content=error_obs),
        )
    )
    assert len(fake.received) == 2

    msgs = fake.received[1].body["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[1]["content"] == [
        {"type": "text", "text": "Let me look these up."},
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "query_metric",
            "input": {"name": "cpu_load"},
        },
        {
            "type": "tool_use",
            "id": "toolu_2",
            "name": "query_metric",
            "input": {"name": "error_rate"},
        },
    ]
    results = msgs[2]["content"]  # both results in ONE user message
    assert [r["type"] for r in results] == ["tool_result", "tool_result"]
    assert results[0]["tool_use_id"] == "toolu_1"
    assert results[0].get("is_error", False) is False
    assert json.loads(results[0]["content"]) == ok_obs
    assert results[1]["tool_use_id"] == "toolu_2"
    assert results[1]["is_error"] is True
    assert json.loads(results[1]["content"]) == error_obs

    assert second.calls == []
    assert second.final == FinalAnswer(
        claims=[Claim("cpu", 0.42, True), Claim("errors", None, False)],
        abstained=False,
        flags=["tool_error"],
        unresolved=["errors"],
        text="CPU load is 0.42; the error rate could not be read.",
    )
    assert (second.usage.input_tokens, second.usage.output_tokens) == (200, 60)


async def test_submit_answer_tolerates_missing_fields(
    fake: FakeAnthropic, backend: AnthropicBackend
) -> None:
    fake.script(
        Reply(
            body=message(
                [
                    text("Done."),
                    tool_use(
                        "toolu_9", SUBMIT_TOOL, {"claims": [{"key": "cpu", "value": 1}, "junk"]}
                    ),
                ],
                "tool_use",
            )
        )
    )
    resp = await backend.complete(req())
    assert resp.final == FinalAnswer(claims=[Claim("cpu", 1, True)], text="Done.")


async def test_end_turn_prose_only_is_an_unstructured_answer(
    fake: FakeAnthropic, backend: AnthropicBackend
) -> None:
    fake.script(Reply(body=message([text("CPU load is 0.42.")], "end_turn")))
    resp = await backend.complete(req())
    assert resp.calls == []
    assert resp.final == FinalAnswer(text="CPU load is 0.42.", flags=["no_structured_answer"])


async def test_refusal_abstains(fake: FakeAnthropic, backend: AnthropicBackend) -> None:
    fake.script(Reply(body=message([], "refusal", input_tokens=50, output_tokens=0)))
    resp = await backend.complete(req())
    assert resp.final is not None
    assert resp.final.abstained is True
    assert resp.final.flags == ["refusal"]
    assert resp.final.claims == []
    assert resp.stop_reason == "refusal"
    assert resp.usage.input_tokens == 50


async def test_max_tokens_without_submit_is_a_model_error(
    fake: FakeAnthropic, backend: AnthropicBackend
) -> None:
    fake.script(
        Reply(
            body=message(
                [text("I will now"), tool_use("toolu_1", SUBMIT_TOOL, {"claims": []})],
                "max_tokens",
                output_tokens=512,
            )
        )
    )
    with pytest.raises(ModelCallError) as info:
        await backend.complete(req())
    assert info.value.code is ErrorCode.MODEL_ERROR
    assert not is_retryable(info.value.code)
    assert "max_tokens" in str(info.value)
    assert getattr(info.value, "usage").output_tokens == 512  # noqa: B009


async def test_max_tokens_with_complete_submit_is_used(
    fake: FakeAnthropic, backend: AnthropicBackend
) -> None:
    fake.script(Reply(body=message([tool_use("toolu_1", SUBMIT_TOOL, SUBMIT_INPUT)], "max_tokens")))
    resp = await backend.complete(req())
    assert resp.final is not None
    assert [c.key for c in resp.final.claims] == ["cpu", "errors"]


# ------------------------------------------------------------------ errors


async def test_429_is_waited_out_for_its_retry_after_not_raised(
    fake: FakeAnthropic, backend: AnthropicBackend, clock: FakeTime
) -> None:
    fake.script(
        Reply(429, error_body("rate_limit_error", "slow down"), headers={"retry-after": "7"}),
        Reply(body=message([tool_use("toolu_1", SUBMIT_TOOL, SUBMIT_INPUT)], "tool_use")),
    )
    resp = await backend.complete(req())
    assert resp.final is not None  # the request was sent again and answered
    assert clock.slept == [7.0]  # after the server's retry-after, on the limiter's clock
    assert backend.limiter.stats.rate_limited == 1
    assert len(fake.received) == 2  # one resend of ours (max_retries=0: none of the SDK's)
    assert fake.received[0].body == fake.received[1].body


async def test_429s_past_the_pacing_limit_are_an_infrastructure_fault(fake: FakeAnthropic) -> None:
    clock = FakeTime()
    limiter = RateLimiter(clock=clock.clock, sleep=clock.sleep, wall=clock.wall)
    b = AnthropicBackend(ModelSpec(base_url=fake.url), KEY, limiter=limiter, max_pacing_s=20)
    fake.script(
        *[Reply(429, error_body("rate_limit_error", "no"), headers={"retry-after": "8"})] * 3
    )
    try:
        with pytest.raises(ModelCallError) as info:
            await b.complete(req())
    finally:
        await b.aclose()
    assert info.value.code is ErrorCode.RATE_LIMIT
    assert info.value.infrastructure is not None
    assert "kept answering 429" in info.value.infrastructure
    assert len(fake.received) == 3 and clock.slept == [8.0, 8.0]


@pytest.mark.parametrize(
    ("status", "err_type", "code"),
    [
        (529, "overloaded_error", ErrorCode.TRANSIENT),
        (500, "api_error", ErrorCode.TRANSIENT),
        (503, "api_error", ErrorCode.TRANSIENT),
        (401, "authentication_error", ErrorCode.PERMISSION_DENIED),
        (403, "permission_error", ErrorCode.PERMISSION_DENIED),
        (400, "invalid_request_error", ErrorCode.MODEL_ERROR),
        (404, "not_found_error", ErrorCode.MODEL_ERROR),
        (422, "invalid_request_error", ErrorCode.MODEL_ERROR),
    ],
)
async def test_status_errors_are_classified(
    fake: FakeAnthropic, backend: AnthropicBackend, status: int, err_type: str, code: ErrorCode
) -> None:
    fake.script(Reply(status, error_body(err_type, "something went wrong")))
    with pytest.raises(ModelCallError) as info:
        await backend.complete(req())
    assert info.value.code is code
    assert info.value.status == status
    assert info.value.retry_after_s is None
    assert len(fake.received) == 1


async def test_529_is_transient(fake: FakeAnthropic, backend: AnthropicBackend) -> None:
    fake.script(Reply(529, error_body("overloaded_error", "Overloaded")))
    with pytest.raises(ModelCallError) as info:
        await backend.complete(req())
    assert info.value.code is ErrorCode.TRANSIENT
    assert is_retryable(info.value.code)
    assert info.value.status == 529
    assert len(fake.received) == 1


async def test_invalid_retry_after_is_ignored_for_a_backoff(
    fake: FakeAnthropic, backend: AnthropicBackend, clock: FakeTime
) -> None:
    busy = Reply(429, error_body("rate_limit_error", "slow down"), headers={"retry-after": "soon"})
    fake.script(busy, busy, Reply(body=message([text("done")])))
    await backend.complete(req())
    assert clock.slept == [1.0, 2.0]  # no usable retry-after: a doubling backoff


@pytest.mark.parametrize(
    "silence",
    [
        Reply(hang=True),
        Reply(body=message([text("late")]), delay_s=2.0),
        Reply(body=message([text("late")]), trickle_s=0.01),  # each read in time, all late
    ],
)
async def test_a_server_silent_past_the_timeout_is_an_infra_fault_not_retried(
    fake: FakeAnthropic, silence: Reply
) -> None:
    fake.script(silence)
    b = AnthropicBackend(ModelSpec(base_url=fake.url), KEY, timeout_s=0.3)
    try:
        with pytest.raises(ModelCallError) as info:
            await b.complete(req())
    finally:
        await b.aclose()
    reason = f"the model server at {where(fake.url)} did not answer in 0.3s"
    assert info.value.infrastructure == str(info.value) == reason
    assert info.value.code is ErrorCode.INFRA_FAULT and not is_retryable(info.value.code)
    assert info.value.status is None and info.value.timed_out
    assert len(fake.received) == 1


@pytest.mark.parametrize("late", [0.5, None])
async def test_wait_free_waits_for_a_one_token_answer(
    fake: FakeAnthropic, late: float | None
) -> None:
    answer = Reply(body=message([text("p")]), delay_s=late or 0)
    fake.script(Reply(hang=True) if late is None else answer)
    b = AnthropicBackend(ModelSpec(base_url=fake.url), KEY, timeout_s=0.3)
    try:
        said = await b.wait_free(1.0)
    finally:
        await b.aclose()
    assert fake.received[0].body["max_tokens"] == 1
    if late is None:
        assert said == f"the model server at {where(fake.url)} did not answer in 1s"
    else:
        assert said is None


async def test_connection_refused_is_transient() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    b = AnthropicBackend(ModelSpec(base_url=f"http://127.0.0.1:{port}"), KEY, timeout_s=2.0)
    try:
        with pytest.raises(ModelCallError) as info:
            await b.complete(req())
    finally:
        await b.aclose()
    assert info.value.code is ErrorCode.TRANSIENT
    assert info.value.status is None


# ------------------------------------------------------------------ the key never leaks


async def test_api_key_never_leaks(
    fake: FakeAnthropic, backend: AnthropicBackend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("anthropic", "httpx2", "httpcore", "httpx", "errorflow"):
        caplog.set_level(logging.DEBUG, logger=name)
    fake.script(
        # a server that echoes the key back in its error message
        Reply(401, error_body("authentication_error", f"invalid x-api-key {KEY}")),
        Reply(429, error_body("rate_limit_error", f"key={KEY}"), headers={"retry-after": "1"}),
        Reply(529, error_body("overloaded_error", "Overloaded")),
        Reply(
            body=message([tool_use("toolu_1", "query_metric", {"name": "cpu_load"})], "tool_use")
        ),
    )
    errors: list[ModelCallError] = []
    for _ in range(2):  # the 401 and the 529 (the 429 is waited out by the next call)
        with pytest.raises(ModelCallError) as info:
            await backend.complete(req())
        errors.append(info.value)
    await backend.complete(req())

    assert [auth_value(r.headers) for r in fake.received] == [KEY] * 4
    for err in errors:
        assert KEY not in str(err)
        assert KEY not in repr(err)
        assert "SECRETKEY" not in str(err)
        assert err.__cause__ is None and err.__context__ is None
    assert KEY not in repr(backend)
    assert KEY not in str(backend)
    assert not any(KEY in str(v) for v in vars(backend).values())
    assert caplog.records, "expected debug logging to be captured"
    assert any(r.name.startswith("anthropic") for r in caplog.records)
    assert KEY not in caplog.text
    assert "SECRETKEY" not in caplog.text


def test_empty_key_is_refused() -> None:
    with pytest.raises(ValueError):
        AnthropicBackend(ModelSpec(), "  ")


def test_api_key_from_env() -> None:
    assert api_key_from_env({API_KEY_ENV: KEY}) == KEY
    assert api_key_from_env({API_KEY_ENV: "  "}) is None
    assert api_key_from_env({}) is None


# ------------------------------------------------------------------ rendering


def test_consecutive_user_turns_merge_and_upstream_is_json() -> None:
    upstream = UpstreamTurn(
        sender="researcher",
        status="partial_failure",
        confidence=0.4,
        errors=[{"code": "timeout", "tool": "query_metric"}],
        answer=FinalAnswer(claims=[Claim("cpu", 0.42, False)], flags=["tool_error"], text="x"),
    )
    msgs = render_messages([TASK, upstream])
    assert len(msgs) == 1 and msgs[0]["role"] == "user"
    blocks = msgs[0]["content"]
    assert len(blocks) == 2
    payload = json.loads(blocks[1]["text"].split("\n", 1)[1])
    assert payload == {
        "sender": "researcher",
        "status": "partial_failure",
        "confidence": 0.4,
        "errors": [{"code": "timeout", "tool": "query_metric"}],
        "answer": {
            "claims": [{"key": "cpu", "value": 0.42, "certain": False}],
            "abstained": False,
            "flags": ["tool_error"],
            "unresolved": [],
            "text": "x",
        },
    }


def test_truncated_call_and_missing_observation_are_rendered_validly() -> None:
    calls = [
        ToolCall(id="c1", name="query_metric", arguments='{"name": "cpu'),
        ToolCall(id="c2", name="query_metric", arguments={"name": "x"}),
    ]
    obs = ObservationTurn(call_id="c1", tool="query_metric", content={"ok": False, "error": {}})
    msgs = render_messages([TASK, AssistantTurn(calls=calls), obs])
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[1]["content"][0]["input"] == {"_raw": '{"name": "cpu'}
    results = msgs[2]["content"]
    assert [r["tool_use_id"] for r in results] == ["c1", "c2"]  # c2 got a synthetic result
    assert all(r["is_error"] for r in results)


def test_tool_results_precede_text_in_a_merged_user_message() -> None:
    calls = [ToolCall(id="c1", name="query_metric", arguments={"name": "cpu_load"})]
    upstream = UpstreamTurn("a", "ok", 1.0, [], FinalAnswer())
    obs = ObservationTurn(call_id="c1", tool="query_metric", content={"ok": True})
    msgs = render_messages([TASK, AssistantTurn(calls=calls), upstream, obs])
    assert [b["type"] for b in msgs[2]["content"]] == ["tool_result", "text"]


def _msg(stop_reason: str | None, *blocks: dict[str, Any]) -> SimpleNamespace:
    return SimpleNamespace(
        stop_reason=stop_reason,
        content=[SimpleNamespace(**b) for b in blocks],
        usage=SimpleNamespace(input_tokens=3, output_tokens=4),
    )


def test_dotted_tool_names_round_trip() -> None:
    tool = ToolDef("metrics.query", "d", {"type": "object", "properties": {}})
    assert [t["name"] for t in render_tools([tool])] == ["metrics_query", SUBMIT_TOOL]
    msg = _msg("tool_use", tool_use("toolu_1", "metrics_query", {}))
    resp = parse_message(msg, {"metrics_query": "metrics.query"})
    assert resp.calls[0].name == "metrics.query"


def test_pause_turn_and_stop_sequence() -> None:
    with pytest.raises(ModelCallError) as info:
        parse_message(_msg("pause_turn"))
    assert info.value.code is ErrorCode.TRANSIENT
    resp = parse_message(_msg("pause_turn", tool_use("t1", "query_metric", {"name": "a"})))
    assert [c.id for c in resp.calls] == ["t1"]
    resp = parse_message(_msg("stop_sequence", text("partial prose")))
    assert resp.final == FinalAnswer(text="partial prose", flags=["no_structured_answer"])
    resp = parse_message(_msg(None, tool_use("t2", SUBMIT_TOOL, SUBMIT_INPUT)))
    assert resp.final is not None and resp.stop_reason == "unknown"
    assert resp.usage.output_tokens == 4


def test_parse_retry_after() -> None:
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"retry-after": "1.5"}) == 1.5
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after": "nan"}) is None
    assert parse_retry_after({}) is None
    assert parse_retry_after({"retry-after": "-3"}) == 0.0
    when = parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0)
    assert when == 10.0


def test_submit_answer_carries_a_reviewers_revise_list() -> None:
    from errorflow.models.anthropic.reply import parse_submit
    from errorflow.models.anthropic.request import SUBMIT_SCHEMA

    assert "revise" in SUBMIT_SCHEMA["properties"]
    answer = parse_submit({"claims": [], "abstained": False, "revise": ["papers", 3]})
    assert answer.revise == ["papers", "3"]


def test_the_conversation_starts_and_ends_with_the_user() -> None:
    msgs = render_messages([AssistantTurn(calls=[], text="Thinking aloud.")])
    assert msgs == [
        {"role": "user", "content": [{"type": "text", "text": "Begin."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Thinking aloud."}]},
        {"role": "user", "content": [{"type": "text", "text": "Continue."}]},
    ]
    assert render_messages([]) == [
        {"role": "user", "content": [{"type": "text", "text": "Begin."}]}
    ]


def test_an_observation_without_its_call_is_sent_as_text() -> None:
    obs = ObservationTurn(call_id="c9", tool="query_metric", content={"ok": True, "result": 1})
    msgs = render_messages([TASK, AssistantTurn(calls=[]), obs])
    assert [m["role"] for m in msgs] == ["user"]  # the empty assistant turn is dropped
    assert msgs[0]["content"][1] == {
        "type": "text",
        "text": 'Result of tool call c9: {"ok":true,"result":1}',
    }


def test_assistant_turns_in_a_row_are_one_message_and_its_calls_get_results() -> None:
    first = AssistantTurn(calls=[ToolCall(id="c1", name="query_metric", arguments={})])
    second = AssistantTurn(calls=[], text="Moving on.")
    msgs = render_messages([TASK, first, second])
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert [b["type"] for b in msgs[1]["content"]] == ["tool_use", "text"]
    (missing,) = msgs[2]["content"]
    assert missing["type"] == "tool_result" and missing["tool_use_id"] == "c1"
    assert missing["is_error"] is True


# ------------------------------------------------------------------ infrastructure


def where(url: str) -> str:
    return url.removeprefix("http://")


@pytest.mark.parametrize(
    ("status", "err_type", "infrastructure"),
    [
        (401, "authentication_error", "the model server at {} refused the API key (401)"),
        (403, "permission_error", "the model server at {} refused the API key (403)"),
        (
            404,
            "not_found_error",
            "model claude-test does not exist on the model server at {} (404)",
        ),
        (529, "overloaded_error", None),  # load is part of the experiment
        (500, "api_error", None),
        (408, "timeout_error", None),  # retried by the policy layer
        (
            400,
            "invalid_request_error",
            "the model server at {} refused the request "
            "(HTTP 400 invalid_request_error: echoing [REDACTED_KEY])",
        ),
        (
            413,
            "request_too_large",
            "the model server at {} refused the request "
            "(HTTP 413 request_too_large: echoing [REDACTED_KEY])",
        ),
        (
            422,
            "invalid_request_error",
            "the model server at {} refused the request "
            "(HTTP 422 invalid_request_error: echoing [REDACTED_KEY])",
        ),
    ],
)
async def test_infrastructure_statuses_name_the_server(
    fake: FakeAnthropic,
    backend: AnthropicBackend,
    status: int,
    err_type: str,
    infrastructure: str | None,
) -> None:
    fake.script(Reply(status, error_body(err_type, f"echoing {KEY}")))
    with pytest.raises(ModelCallError) as info:
        await backend.complete(req())
    expected = None if infrastructure is None else infrastructure.format(where(fake.url))
    assert info.value.infrastructure == expected
    assert KEY not in str(info.value.infrastructure)


async def test_connection_refused_is_infrastructure_and_says_so() -> None:
    url = unused_url()
    b = AnthropicBackend(ModelSpec(base_url=url), KEY, timeout_s=2.0)
    try:
        with pytest.raises(ModelCallError) as info:
            await b.complete(req())
    finally:
        await b.aclose()
    reason = f"cannot reach the model server at {where(url)} (connection refused)"
    assert info.value.code is ErrorCode.TRANSIENT  # still retried by the policy layer
    assert info.value.infrastructure == str(info.value) == reason


@pytest.mark.parametrize("kind", list(GARBAGE))
async def test_a_200_that_is_not_a_messages_reply_is_an_infra_fault(
    fake: FakeAnthropic, backend: AnthropicBackend, kind: str
) -> None:
    fake.script(GARBAGE[kind])
    with pytest.raises(ModelCallError) as info:
        await backend.complete(req())
    reason = info.value.infrastructure
    assert reason is not None and reason == str(info.value) and "\n" not in reason
    assert reason.startswith(
        f"the model server at {where(fake.url)} answered a Messages API request with "
    )
    assert reason.endswith(", not a Messages API reply")
    assert info.value.code is ErrorCode.INFRA_FAULT and not is_retryable(info.value.code)
    assert len(fake.received) == 1


async def test_what_came_instead_of_a_reply_is_named_and_scrubbed(
    fake: FakeAnthropic, backend: AnthropicBackend
) -> None:
    fake.script(
        GARBAGE["an HTML page"],
        Reply(200, f"not json, key {KEY}\nsecond line", content_type="application/json"),
    )
    with pytest.raises(ModelCallError) as html:
        await backend.complete(req())
    assert "with an HTML page titled '502 Bad Gateway', not" in str(html.value)
    with pytest.raises(ModelCallError) as echo:
        await backend.complete(req())
    assert KEY not in str(echo.value) and "bytes that are not JSON ('not json, key " in str(
        echo.value
    )


def test_the_server_is_host_and_port_without_credentials() -> None:
    spec = ModelSpec(base_url="https://user:hunter2@proxy.example:8443/anthropic")
    assert AnthropicBackend(spec, KEY).server == "proxy.example:8443"
    assert AnthropicBackend(ModelSpec(), KEY).server == "api.anthropic.com:443"
    assert AnthropicBackend(ModelSpec(base_url="http://[::1]"), KEY).server == "[::1]:80"


async def check(url: str, model: str = "claude-test", key: str = KEY) -> InfrastructureError:
    b = AnthropicBackend(ModelSpec(model=model, base_url=url), key, timeout_s=5.0)
    try:
        with pytest.raises(InfrastructureError) as info:
            await b.check()
    finally:
        await b.aclose()
    assert KEY not in str(info.value) and "SECRETKEY" not in str(info.value)
    assert info.value.__context__ is None and info.value.__cause__ is None
    return info.value


async def test_check_asks_for_the_model_once_and_sends_no_message() -> None:
    with FakeAnthropic(api_key=KEY, models={"claude-test"}) as fake:
        b = AnthropicBackend(ModelSpec(model="claude-test", base_url=fake.url), KEY)
        await b.check()
        await b.aclose()
    assert [r.path for r in fake.lookups] == ["/v1/models/claude-test"]
    assert fake.received == []
    assert auth_value(fake.lookups[0].headers) == KEY


async def test_check_learns_how_many_requests_a_llama_cpp_server_answers_at_once() -> None:
    """llama.cpp's server speaks the Messages API too; its `GET /props` says how many."""
    with FakeAnthropic(api_key=KEY, props={"total_slots": 2}) as fake:
        limiter = RateLimiter()
        b = AnthropicBackend(ModelSpec(model="claude-test", base_url=fake.url), KEY,
                             limiter=limiter)  # fmt: skip
        await b.check()
        await b.aclose()
    assert limiter.stats.server_slots == 2
    assert [r.path for r in fake.props_asked] == ["/props"]
    assert auth_value(fake.props_asked[0].headers) == KEY


async def test_check_of_an_unreachable_server() -> None:
    url = unused_url()
    err = await check(url)
    assert str(err) == f"cannot reach the model server at {where(url)} (connection refused)"


async def test_check_of_a_refused_key() -> None:
    with FakeAnthropic(api_key="sk-ant-the-right-one-0000000") as fake:
        err = await check(fake.url)
    assert str(err) == f"the model server at {where(fake.url)} refused the API key (401)"


async def test_check_of_a_missing_model_confirms_with_one_token() -> None:
    with FakeAnthropic(models={"claude-real"}) as fake:
        err = await check(fake.url, model="claude-x")
    assert (
        str(err) == f"model claude-x does not exist on the model server at {where(fake.url)} (404)"
    )
    assert len(fake.received) == 1 and fake.received[0].body["max_tokens"] == 1


async def test_check_passes_a_server_without_the_models_endpoint() -> None:
    with FakeAnthropic(serves_models=False) as fake:
        fake.script(Reply(body=message([text("p")], "max_tokens", output_tokens=1)))
        b = AnthropicBackend(ModelSpec(model="claude-test", base_url=fake.url), KEY)
        await b.check()
        await b.aclose()
    assert len(fake.lookups) == 1 and len(fake.received) == 1


async def test_check_lets_load_through() -> None:
    with FakeAnthropic(serves_models=False) as fake:
        fake.script(Reply(529, error_body("overloaded_error", "busy")))
        b = AnthropicBackend(ModelSpec(model="claude-test", base_url=fake.url), KEY)
        await b.check()  # an overloaded server is what the run measures
        await b.aclose()


async def test_check_of_a_server_that_never_answers() -> None:
    with FakeAnthropic() as fake:
        b = AnthropicBackend(ModelSpec(base_url=fake.url), KEY, timeout_s=0.3)
        fake.serves_models = False
        fake.script(Reply(body=message([text("late")]), delay_s=2.0))
        # the lookup 404s (no endpoint), the one-token message times out
        with pytest.raises(InfrastructureError, match=r"did not answer in 0.3s"):
            await b.check()
        await b.aclose()


@pytest.mark.parametrize("kind", list(GARBAGE))
async def test_check_refuses_a_model_lookup_answered_with_garbage(kind: str) -> None:
    with FakeAnthropic(lookup=GARBAGE[kind]) as fake:
        err = await check(fake.url)
        assert fake.received == []  # the lookup said it all
    assert str(err).startswith(
        f"the model server at {where(fake.url)} answered the lookup of model claude-test with "
    )
    assert str(err).endswith(", not a model description") and "\n" not in str(err)


async def test_check_refuses_a_lookup_answered_with_another_shape() -> None:
    lookup = Reply(200, {"type": "error", "error": {"type": "api_error", "message": "no"}})
    with FakeAnthropic(lookup=lookup) as fake:
        err = await check(fake.url)
    assert str(err).endswith(
        "lookup of model claude-test with JSON with type 'error', not a model description"
    )


@pytest.mark.parametrize("kind", list(GARBAGE))
async def test_check_refuses_a_server_whose_one_token_message_gets_garbage(kind: str) -> None:
    with FakeAnthropic(serves_models=False) as fake:
        fake.script(GARBAGE[kind])
        err = await check(fake.url)
    assert "answered a Messages API request with " in str(err)


async def test_check_refuses_a_server_that_refuses_every_request() -> None:
    bad = Reply(400, error_body("invalid_request_error", "malformed"))
    with FakeAnthropic(lookup=bad, respond=lambda _: bad) as fake:
        err = await check(fake.url)
    assert str(err) == (
        f"the model server at {where(fake.url)} refused the request "
        "(HTTP 400 invalid_request_error: malformed)"
    )
    assert len(fake.lookups) == 1 and len(fake.received) == 1  # the message confirmed it


async def test_check_passes_a_proxy_refusing_the_lookup_route_if_messages_work() -> None:
    with FakeAnthropic(lookup=Reply(405, error_body("invalid_request_error", "GET"))) as fake:
        fake.script(Reply(body=message([text("p")], "max_tokens", output_tokens=1)))
        b = AnthropicBackend(ModelSpec(model="claude-test", base_url=fake.url), KEY)
        await b.check()
        await b.aclose()
    assert len(fake.received) == 1


def test_a_need_with_several_arguments_and_a_dependency_is_rendered_whole() -> None:
    from errorflow.models.anthropic.request import render_task

    need = NeedView(
        "kb",
        "kb_articles",
        "product",
        "the KB articles",
        None,
        fixed={"lang": "en"},
        depends={"product": ("ticket", "product")},
    )
    text = render_task(TaskTurn("Answer the ticket.", [need]))
    assert (
        '- key "kb": the KB articles (tool kb_articles, arguments lang = en, product = the '
        'product of the value found for key "ticket")'
    ) in text


def test_a_need_with_a_second_source_names_both_tools() -> None:
    from errorflow.models.anthropic.request import render_task

    need = NeedView("revenue", "kpi_cache", "name", "Q3 revenue", "rev.q3", sources=("kpi_origin",))
    text = render_task(TaskTurn("Brief the team.", [need]))
    assert '- key "revenue": Q3 revenue (tool kpi_cache or kpi_origin, argument name = rev.q3)' in (
        text
    )


# ------------------------------------------------------------------ what goes on the wire


@pytest.mark.parametrize(
    ("base_url", "policy", "sent"),
    [
        (None, "auto", False),  # Anthropic's API, version 2026-10-21: no sampling parameters
        ("https://api.anthropic.com", "auto", False),
        ("https://eu.api.anthropic.com/", "auto", False),
        ("http://localhost:11434", "auto", True),  # Ollama, vLLM, llama.cpp: the older shape
        ("https://proxy.example/anthropic", "auto", True),
        ("http://localhost:11434", "never", False),
        (None, "always", True),
    ],
)
def test_temperature_is_sent_where_the_server_takes_it(
    base_url: str | None, policy: TemperaturePolicy, sent: bool
) -> None:
    spec = ModelSpec(backend="anthropic", model="m", base_url=base_url, temperature=0.3)
    body, _ = WireFormat.of(spec, policy).render(req())
    assert ("temperature" in body) is sent
    assert body.get("temperature", 0.3) == 0.3


def test_without_prompt_caching_the_system_prompt_is_a_plain_string() -> None:
    body, _ = WireFormat.of(ModelSpec(model="m"), prompt_cache=False).render(req())
    assert isinstance(body["system"], str) and "cache_control" not in json.dumps(body)


async def test_cache_usage_is_split_from_the_input(
    fake: FakeAnthropic, backend: AnthropicBackend
) -> None:
    reply = message([tool_use("t1", SUBMIT_TOOL, SUBMIT_INPUT)], "tool_use", input_tokens=40)
    reply["usage"].update(cache_read_input_tokens=900, cache_creation_input_tokens=60)
    fake.script(Reply(body=reply))
    usage = (await backend.complete(req())).usage
    assert isinstance(usage, CachedUsage)
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        1000,
        900,
        60,
    )
    assert usage.uncached_input_tokens == 40


async def test_a_429s_rate_limit_headers_feed_the_limiter(
    fake: FakeAnthropic, backend: AnthropicBackend, clock: FakeTime
) -> None:
    fake.script(
        Reply(
            body=message([text("first")]),
            headers={
                "anthropic-ratelimit-requests-limit": "50",
                "anthropic-ratelimit-requests-remaining": "0",
                "anthropic-ratelimit-requests-reset": _in(clock, 3.0),
            },
        ),
        Reply(body=message([text("second")])),
    )
    await backend.complete(req())
    await backend.complete(req())
    assert clock.slept == [pytest.approx(3.0)]  # the budget was spent: wait for its reset


def _in(clock: FakeTime, seconds: float) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(clock.wall() + seconds, tz=UTC).isoformat()
