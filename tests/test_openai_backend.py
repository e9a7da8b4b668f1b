"""OpenAIBackend against a real local HTTP server, with the real `openai` SDK as client."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from fake_anthropic import unused_url
from fake_openai import GARBAGE, FakeOpenAI, Reply, completion, openai_error, tool_call
from fake_time import FakeTime

from errorflow.core.taxonomy import ErrorCode, is_retryable
from errorflow.models.anthropic.request import SUBMIT_TOOL
from errorflow.models.backend import (
    AssistantTurn,
    InfrastructureError,
    ModelCallError,
    ModelRequest,
    NeedView,
    ObservationTurn,
    TaskTurn,
    ToolDef,
)
from errorflow.models.openai.backend import OpenAIBackend
from errorflow.models.openai.reply import UnusableReply
from errorflow.models.rate_limit import RateLimiter, RateLimits
from errorflow.scenario.spec.model import ModelSpec

KEY = "sk-proj-test-SECRETKEY123456"

QUERY_METRIC = ToolDef(
    name="metrics.query",
    description="Read one metric by name.",
    input_schema={
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    },
)

TASK = TaskTurn(
    prompt="Report the CPU load.",
    needs=[
        NeedView(
            id="cpu",
            tool="metrics.query",
            arg="name",
            wording="the CPU load",
            identifier="cpu_load",
        )
    ],
)

SUBMIT = {"claims": [{"key": "cpu", "value": 0.42, "certain": True}], "abstained": False}


def req(*turns: Any) -> ModelRequest:
    return ModelRequest(
        agent="researcher",
        role="researcher",
        system="You are the researcher.",
        turns=list(turns) or [TASK],
        tools=[QUERY_METRIC],
    )


def where(url: str) -> str:
    return url.removeprefix("http://").removesuffix("/v1")


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def clock() -> FakeTime:
    return FakeTime()


def spec(url: str | None, **update: Any) -> ModelSpec:
    fields: dict[str, Any] = {
        "backend": "openai",
        "model": "gpt-test",
        "base_url": url,
        "max_tokens": 300,
        "temperature": 0.2,
    }
    return ModelSpec(**{**fields, **update})


@pytest.fixture
async def backend(fake: FakeOpenAI, clock: FakeTime) -> AsyncIterator[OpenAIBackend]:
    limiter = RateLimiter(clock=clock.clock, sleep=clock.sleep, wall=clock.wall)
    b = OpenAIBackend(spec(fake.url), KEY, timeout_s=5.0, limiter=limiter)
    yield b
    await b.aclose()


async def failure_of(b: OpenAIBackend) -> ModelCallError:
    """What one request to `b` raised (it must raise); the backend is closed after."""
    try:
        with pytest.raises(ModelCallError) as info:
            await b.complete(req())
    finally:
        await b.aclose()
    return info.value


# -- the tool-use loop -----------------------------------------------------------------


async def test_a_tool_call_then_the_answer_as_a_tool_call(
    fake: FakeOpenAI, backend: OpenAIBackend
) -> None:
    fake.script(
        Reply(
            body=completion(
                [tool_call("call_1", "metrics_query", {"name": "cpu_load"})],
                prompt_tokens=120,
                completion_tokens=12,
            )
        ),
        Reply(body=completion([tool_call("call_2", SUBMIT_TOOL, SUBMIT)], "done")),
    )
    first = await backend.complete(req())
    [call] = first.calls
    assert (call.id, call.name, call.arguments) == ("call_1", "metrics.query", {"name": "cpu_load"})
    assert (first.usage.input_tokens, first.usage.output_tokens) == (120, 12)
    failed = ObservationTurn("call_1", "metrics.query", {"ok": False, "error": {"code": "x"}})
    second = await backend.complete(req(TASK, AssistantTurn([call]), failed))
    assert second.final is not None and second.final.claims[0].value == 0.42
    assert second.final.text == "done"

    body = fake.received[1].body
    assert fake.received[1].path == "/v1/chat/completions"
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool"]
    assert body["messages"][2]["tool_calls"][0]["function"] == {
        "name": "metrics_query",
        "arguments": '{"name":"cpu_load"}',
    }
    result = body["messages"][3]
    assert result["tool_call_id"] == "call_1"
    assert json.loads(result["content"]) == {"is_error": True, "ok": False, "error": {"code": "x"}}
    assert [t["function"]["name"] for t in body["tools"]] == ["metrics_query", SUBMIT_TOOL]
    assert body["tool_choice"] == "auto"
    assert (body["max_tokens"], body["temperature"]) == (300, 0.2)  # a local server takes both
    assert "max_completion_tokens" not in body
    assert fake.received[0].headers["authorization"] == f"Bearer {KEY}"


async def test_prose_only_is_an_unstructured_answer(
    fake: FakeOpenAI, backend: OpenAIBackend
) -> None:
    fake.script(Reply(body=completion(None, "The CPU load is high.", "stop")))
    resp = await backend.complete(req())
    assert resp.final is not None and resp.final.flags == ["no_structured_answer"]
    assert resp.final.text == "The CPU load is high." and resp.stop_reason == "stop"


async def test_a_reply_cut_at_the_limit_is_a_model_error_unless_its_answer_is_whole(
    fake: FakeOpenAI, backend: OpenAIBackend
) -> None:
    cut = tool_call("c", SUBMIT_TOOL, '{"claims": [{"key": "cpu", "val')
    fake.script(
        Reply(body=completion([cut], None, "length", completion_tokens=300)),
        Reply(body=completion([tool_call("c", SUBMIT_TOOL, SUBMIT)], None, "length")),
    )
    with pytest.raises(UnusableReply) as info:
        await backend.complete(req())
    assert info.value.code is ErrorCode.MODEL_ERROR and info.value.usage.output_tokens == 300
    assert info.value.infrastructure is None  # the model's answer: the experiment's
    resp = await backend.complete(req())
    assert resp.final is not None and resp.final.claims[0].key == "cpu"


async def test_cached_prompt_tokens_are_counted_apart(
    fake: FakeOpenAI, backend: OpenAIBackend
) -> None:
    fake.script(Reply(body=completion(None, "x", "stop", prompt_tokens=2000, cached_tokens=1536)))
    resp = await backend.complete(req())
    usage = resp.usage
    assert usage.input_tokens == 2000 and getattr(usage, "cache_read_tokens", None) == 1536


# -- rate limits -------------------------------------------------------------------------


async def test_429_is_waited_out_for_its_retry_after_not_raised(
    fake: FakeOpenAI, backend: OpenAIBackend, clock: FakeTime
) -> None:
    slow = openai_error("requests", "Rate limit reached", "rate_limit_exceeded")
    fake.script(
        Reply(429, slow, headers={"retry-after": "7"}),
        Reply(429, slow, headers={"retry-after-ms": "250"}),
        Reply(body=completion(None, "ok", "stop")),
    )
    resp = await backend.complete(req())
    assert resp.final is not None and resp.final.text == "ok"
    assert clock.slept == [7.0, 0.25]
    assert backend.limiter.stats.rate_limited == 2
    assert len(fake.received) == 3  # our resends only: the SDK retries nothing
    assert fake.received[0].body == fake.received[2].body


async def test_429s_past_the_pacing_limit_are_an_infrastructure_fault(fake: FakeOpenAI) -> None:
    clock = FakeTime()
    limiter = RateLimiter(clock=clock.clock, sleep=clock.sleep, wall=clock.wall)
    b = OpenAIBackend(spec(fake.url), KEY, limiter=limiter, max_pacing_s=20)
    refused = Reply(429, openai_error("requests", "no"), headers={"retry-after": "8"})
    fake.script(refused, refused, refused)
    error = await failure_of(b)
    assert error.code is ErrorCode.RATE_LIMIT
    assert "kept answering 429" in (error.infrastructure or "")


async def test_429s_that_ask_for_no_pause_are_given_up_on_in_time() -> None:
    """`retry-after: 0` to every request asks for no pause at all: taken once, then the
    backoff (2 s, past the 0.3 s pacing limit here: given up on at the second 429)."""
    refused = Reply(429, openai_error("requests", "no"), headers={"retry-after": "0"})
    with FakeOpenAI(respond=lambda got: refused) as server:
        b = OpenAIBackend(spec(server.url), KEY, max_pacing_s=0.3)
        error = await failure_of(b)
    assert error.code is ErrorCode.RATE_LIMIT
    assert "kept answering 429 (rate limited) for 2s" in (error.infrastructure or "")
    assert len(server.received) == b.limiter.stats.rate_limited == 2


async def test_the_x_ratelimit_headers_feed_the_limiter(
    fake: FakeOpenAI, backend: OpenAIBackend, clock: FakeTime
) -> None:
    spent = {
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "3s",
    }
    fake.script(
        Reply(body=completion(None, "a", "stop"), headers=spent),
        Reply(body=completion(None, "b", "stop")),
    )
    await backend.complete(req())
    await backend.complete(req())
    assert clock.slept == [pytest.approx(3.0)]  # the budget was spent: wait for its reset


# -- failures ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code", "infra"),
    [
        (500, ErrorCode.TRANSIENT, "failed (HTTP 500 server_error: boom)"),
        (503, ErrorCode.TRANSIENT, "failed (HTTP 503 server_error: boom)"),
        (409, ErrorCode.TRANSIENT, None),
        (408, ErrorCode.TIMEOUT, None),
        (401, ErrorCode.PERMISSION_DENIED, "refused the API key (401)"),
        (404, ErrorCode.MODEL_ERROR, "model gpt-test does not exist on the model server"),
        (400, ErrorCode.MODEL_ERROR, "refused the request (HTTP 400 server_error: boom)"),
    ],
)
async def test_statuses_are_classified_and_infrastructure_named(
    fake: FakeOpenAI, backend: OpenAIBackend, status: int, code: ErrorCode, infra: str | None
) -> None:
    fake.script(Reply(status, openai_error("server_error", "boom")))
    with pytest.raises(ModelCallError) as info:
        await backend.complete(req())
    assert (info.value.code, info.value.status) == (code, status)
    if infra is None:
        assert info.value.infrastructure is None
    else:
        assert info.value.infrastructure is not None and infra in info.value.infrastructure
        assert where(fake.url) in info.value.infrastructure
    assert len(fake.received) == 1


async def test_a_5xx_is_retryable_for_the_policy_and_infrastructure_when_it_gives_up(
    fake: FakeOpenAI, backend: OpenAIBackend
) -> None:
    fake.script(Reply(502, "<html>bad gateway</html>", content_type="text/html"))
    with pytest.raises(ModelCallError) as info:
        await backend.complete(req())
    assert is_retryable(info.value.code)  # the model gate retries it
    assert info.value.infrastructure == f"the model server at {where(fake.url)} failed (HTTP 502)"


@pytest.mark.parametrize("kind", list(GARBAGE))
async def test_a_200_that_is_not_a_chat_completion_is_an_infra_fault(
    fake: FakeOpenAI, backend: OpenAIBackend, kind: str
) -> None:
    fake.script(GARBAGE[kind])
    with pytest.raises(ModelCallError) as info:
        await backend.complete(req())
    assert info.value.code is ErrorCode.INFRA_FAULT and not is_retryable(info.value.code)
    said = info.value.infrastructure or ""
    assert said.startswith(
        f"the model server at {where(fake.url)} answered a Chat Completions request with "
    )
    assert said.endswith("not a Chat Completions reply") and "\n" not in said


@pytest.mark.parametrize(
    "silence",
    [
        Reply(hang=True),
        Reply(body=completion(), delay_s=2.0),
        Reply(body=completion(), trickle_s=0.01),  # each read in time, the whole late
    ],
)
async def test_a_server_silent_past_the_timeout_is_an_infra_fault_not_retried(
    fake: FakeOpenAI, silence: Reply
) -> None:
    fake.script(silence)
    b = OpenAIBackend(spec(fake.url), KEY, timeout_s=0.3)
    error = await failure_of(b)
    reason = f"the model server at {where(fake.url)} did not answer in 0.3s"
    assert error.infrastructure == str(error) == reason
    assert error.code is ErrorCode.INFRA_FAULT and error.timed_out
    assert len(fake.received) == 1


async def test_connection_refused_is_transient_and_infrastructure() -> None:
    url = unused_url() + "/v1"
    b = OpenAIBackend(spec(url), KEY, timeout_s=2.0)
    error = await failure_of(b)
    assert error.code is ErrorCode.TRANSIENT
    assert error.infrastructure == (
        f"cannot reach the model server at {where(url)} (connection refused)"
    )


async def test_the_api_key_never_leaks(
    fake: FakeOpenAI, backend: OpenAIBackend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.script(Reply(400, openai_error("invalid_request_error", f"bad key {KEY} in header")))
    with pytest.raises(ModelCallError) as info:
        await backend.complete(req())
    for text in (str(info.value), info.value.infrastructure or "", repr(backend), caplog.text):
        assert KEY not in text
    assert info.value.__cause__ is None and info.value.__context__ is None
    assert "[REDACTED_KEY]" in str(info.value)


def test_an_empty_key_is_refused() -> None:
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        OpenAIBackend(spec("http://127.0.0.1:1/v1"), "  ")


def test_without_a_base_url_it_is_openai_s_own_api() -> None:
    b = OpenAIBackend(spec(None), KEY)
    assert b.server == "api.openai.com:443"
    assert b.wire.token_field == "max_completion_tokens" and b.wire.temperature is None


# -- the check before the first trial ------------------------------------------------------


async def check(url: str, key: str = KEY, model: str = "gpt-test") -> None:
    b = OpenAIBackend(spec(url, model=model), key, timeout_s=1.0)
    try:
        await b.check()
    finally:
        await b.aclose()


async def test_check_looks_the_model_up_and_sends_nothing_else(fake: FakeOpenAI) -> None:
    await check(fake.url)
    assert [r.path for r in fake.lookups] == ["/v1/models/gpt-test"] and fake.received == []


@pytest.mark.parametrize(
    ("props", "given", "learned"),
    [
        ({"total_slots": 1, "model_alias": "smollm2"}, None, 1),  # llama.cpp's server
        ({"total_slots": 4}, 2, None),  # --max-concurrency 2 was given: it stands
        (None, None, None),  # 404: another server
        ({"total_slots": "1"}, None, None),
        ({"total_slots": True}, None, None),
        ({"total_slots": 0}, None, None),
        ({"slots": 1}, None, None),
    ],
)
async def test_check_learns_how_many_requests_a_llama_cpp_server_answers_at_once(
    props: dict[str, Any] | None, given: int | None, learned: int | None
) -> None:
    with FakeOpenAI(props=props) as fake:
        limiter = RateLimiter(RateLimits(concurrency=given))
        b = OpenAIBackend(spec(fake.url), KEY, timeout_s=1.0, limiter=limiter)
        await b.check()
        await b.aclose()
    assert limiter.stats.server_slots == learned
    asked = fake.props_asked
    assert [r.path for r in asked] == ([] if given else ["/props"])  # beside /v1, not in it
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in asked)


async def test_learned_slots_bound_the_requests_in_flight() -> None:
    limiter = RateLimiter()
    limiter.learn_slots(1)
    inside: list[int] = []

    async def one() -> None:
        async with limiter.slot(1):
            inside.append(limiter.in_flight)
            await asyncio.sleep(0.01)

    await asyncio.gather(*(one() for _ in range(3)))
    assert inside == [1, 1, 1] and limiter.stats.peak_in_flight == 1


async def test_check_of_a_refused_key() -> None:
    with FakeOpenAI(api_key="another") as fake, pytest.raises(InfrastructureError) as info:
        await check(fake.url)
    assert str(info.value) == f"the model server at {where(fake.url)} refused the API key (401)"


async def test_check_of_a_missing_model_confirms_with_one_token() -> None:
    with FakeOpenAI(models={"gpt-real"}) as fake, pytest.raises(InfrastructureError) as info:
        await check(fake.url, model="gpt-x")
    assert str(info.value) == (
        f"model gpt-x does not exist on the model server at {where(fake.url)} (404)"
    )
    assert fake.received[0].body["max_tokens"] == 1


async def test_check_passes_a_server_without_the_models_route(fake: FakeOpenAI) -> None:
    fake.serves_models = False  # llama.cpp's server: GET /v1/models/{id} is a 404
    fake.script(Reply(body=completion(None, "p", "length", completion_tokens=1)))
    await check(fake.url)
    assert len(fake.received) == 1


async def test_check_lets_load_through(fake: FakeOpenAI) -> None:
    fake.lookup = Reply(503, openai_error("server_error", "busy"))
    await check(fake.url)


@pytest.mark.parametrize("kind", ["an HTML page", "non-JSON bytes"])
async def test_check_refuses_a_lookup_answered_with_garbage(kind: str) -> None:
    with FakeOpenAI(lookup=GARBAGE[kind]) as fake, pytest.raises(InfrastructureError) as info:
        await check(fake.url)
    assert "answered the lookup of model gpt-test with" in str(info.value)


async def test_check_of_a_server_that_trickles_its_answer() -> None:
    """Each read in time, the whole past the check's timeout (1 s here): not answering."""
    slow = Reply(body={"id": "gpt-test", "object": "model", "owned_by": "x"}, trickle_s=0.03)
    with FakeOpenAI(lookup=slow) as fake, pytest.raises(InfrastructureError) as info:
        await check(fake.url)
    assert str(info.value) == f"the model server at {where(fake.url)} did not answer in 1s"


async def test_check_of_an_unreachable_server() -> None:
    url = unused_url() + "/v1"
    with pytest.raises(InfrastructureError, match="connection refused"):
        await check(url)


# -- waiting for a busy server after a timeout -----------------------------------------------


async def wait_free(
    url: str, wait_s: float, ping: Callable[[float], Awaitable[None]] | None = None
) -> str | None:
    b = OpenAIBackend(spec(url), KEY, timeout_s=0.3)
    if ping is not None:
        b._ping = ping  # type: ignore[method-assign]
    try:
        return await b.wait_free(wait_s)
    finally:
        await b.aclose()


@pytest.mark.parametrize(
    "answer",
    [
        Reply(body=completion(None, "p", "length", completion_tokens=1), delay_s=0.5),
        Reply(503, openai_error("server_error", "busy")),  # it answered: free to ask
        GARBAGE["an HTML page"],
    ],
)
async def test_wait_free_waits_past_the_timeout_for_any_answer(
    fake: FakeOpenAI, answer: Reply
) -> None:
    fake.script(answer)
    assert await wait_free(fake.url, 2.0) is None
    assert [r.body["max_tokens"] for r in fake.received] == [1]


@pytest.mark.parametrize(
    "silence",
    [Reply(hang=True), Reply(body=completion(None, "p", "length"), trickle_s=0.02)],
)
async def test_wait_free_of_a_server_that_does_not_answer(fake: FakeOpenAI, silence: Reply) -> None:
    fake.script(silence)  # a trickled answer: each read in time, the whole late
    said = await wait_free(fake.url, 0.5)
    assert said == f"the model server at {where(fake.url)} did not answer in 0.5s"


async def test_wait_free_of_an_unreachable_server() -> None:
    said = await wait_free(unused_url() + "/v1", 1.0)
    assert said is not None and said.endswith("(connection refused)")


async def test_a_refused_call_is_not_a_timeout(fake: FakeOpenAI, backend: OpenAIBackend) -> None:
    fake.script(Reply(400, openai_error("invalid_request_error", "no")))
    with pytest.raises(ModelCallError) as info:
        await backend.complete(req())
    assert not info.value.timed_out


async def test_wait_free_of_a_failure_that_is_not_an_answer(fake: FakeOpenAI) -> None:
    async def broken(timeout_s: float) -> None:
        raise RuntimeError(f"bug holding {KEY}")

    said = await wait_free(fake.url, 1.0, broken)
    assert said == "model call failed (RuntimeError)" and not fake.received
