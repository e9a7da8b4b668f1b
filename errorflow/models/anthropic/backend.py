"""The Anthropic Messages API as a `ModelBackend`.

Renders a `ModelRequest` (typed turns, tool list) as a Messages API call and maps the
reply back to tool calls or a `FinalAnswer`. The model ends its work by calling the
`submit_answer` tool, so answers come back structured (claims keyed by need id)
rather than as prose that would have to be parsed.

Failures become `ModelCallError` with a taxonomy code, decided from the exception
type, the HTTP status and the shape of the reply (errorflow/models/server_reply.py),
never from message text:

====================================  =====================  ==========  =====
what happened                         code                   retryable   infra
====================================  =====================  ==========  =====
429                                   paced, not raised (see below)
408                                   timeout                yes
409, 5xx, 529 (overloaded)            transient              yes
no answer within `timeout_s`          infra_fault            no          yes
connection failure                    transient              yes         yes
401, 403                              permission_denied      no          yes
402                                   permission_denied      no          yes
404 (no such model)                   model_error            no          yes
400, 413, 422, other 4xx              model_error            no          yes
a 200 that is not a Messages reply    infra_fault            no          yes
unusable reply (max_tokens, ...)      model_error            no
====================================  =====================  ==========  =====

"infra" failures are errorflow's infrastructure, not the experiment: the error also
carries one line naming the server (`ModelCallError.infrastructure`), and a call that
fails for good that way makes its trial an infra fault (never an outcome). A 4xx
refuses the request itself, whatever the model would have said; a 200 that is empty,
an HTML page, not JSON, or JSON without a Messages reply's content is not the model
speaking; a server silent for `timeout_s` is not answering (not retried: another wait
as long would run into the trial's own timeout). A 429 from
the server is infrastructure too, but one a run can wait out: every request takes a
slot of the server's shared `RateLimiter` (errorflow/models/rate_limit.py), which the
429's `retry-after` and every reply's `anthropic-ratelimit-*` headers feed, and the
request is sent again when the limiter lets it, without the policy layer seeing it. A
call still refused after `max_pacing_s` of such waits fails as an infra fault, rate
limit. Overload (529) and the rest stay part of the experiment, retried by the policy
layer. `check` asks the server once before the first trial (reachable, key accepted,
model exists, and answering the API's shapes) and raises `InfrastructureError`.

The SDK client is built with ``max_retries=0``: retries and backoff of what the
experiment measures are owned by our policy layer (errorflow.policies.retry), which
must see every such failure.

What goes on the wire (`WireFormat`): the system prompt as one text block and the tool
definitions, both marked ``cache_control: ephemeral`` (identical across the trials of a
run, so the server's prompt cache serves them; the reply's usage says how many input
tokens it read from and wrote to the cache); `max_tokens`; and `temperature` where the
server takes it. SDK 2.x speaks API version 2026-10-21, whose Messages API has no
sampling parameters: `messages.create` takes no `temperature` and Anthropic's API
answers 400 to one sent in the body. So by default ("auto") it is not sent to Anthropic
(no `base_url`, or a host under anthropic.com) and is sent, in the request body, to
every other server (Ollama, vLLM, llama.cpp and proxies speak the older shape, which
has it); "always" and "never" decide it for every server.

The API key is handed to the SDK client and nowhere else: it is not kept on the
backend, not shown by ``repr``, not logged, and every error message is scrubbed
(literal key and `redact` patterns) before it leaves this module.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any, cast

import anthropic
from anthropic import AsyncAnthropic

from errorflow.core.redact import redact
from errorflow.models.anthropic.reply import as_int, parse_reply
from errorflow.models.anthropic.request import (
    SDK_FIELDS,
    TemperaturePolicy,
    WireFormat,
    WireRequest,
)
from errorflow.models.backend import (
    InfrastructureError,
    ModelCallError,
    ModelRequest,
    ModelResponse,
)
from errorflow.models.busy_server import BusyServer
from errorflow.models.paced import DEFAULT_MAX_PACING_S, Posted, Refused
from errorflow.models.rate_limit import RateLimiter
from errorflow.models.sdk.backend import SdkBackend, SdkErrors, lookup_unserved, lower_headers
from errorflow.models.sdk.failures import (
    classify_status,
    parse_retry_after,
    server_address,
)
from errorflow.models.server_reply import (
    messages_reply,
    model_description,
)
from errorflow.models.serving import DEFAULT_REQUEST_TIMEOUT_S
from errorflow.protocol.envelope import JsonObject
from errorflow.scenario.spec.model import ModelSpec

log = logging.getLogger(__name__)

API_KEY_ENV = "ANTHROPIC_API_KEY"


def api_key_from_env(env: Mapping[str, str] = os.environ) -> str | None:
    """The API key from the environment, or None when unset or blank."""
    value = env.get(API_KEY_ENV)
    if value is None or not value.strip():
        return None
    return value.strip()


# --------------------------------------------------------------------------- backend


class AnthropicBackend(SdkBackend):
    """`ModelBackend` over the Anthropic Messages API (one call per `complete`).

    `send` is the transport alone (a request body in, the reply's JSON body out, paced by
    the shared `limiter`), for the response cache and the recorder in between
    (errorflow/models/served_backend.py); `complete` renders, sends and parses."""

    errors = SdkErrors(
        anthropic.APITimeoutError,
        anthropic.APIConnectionError,
        anthropic.APIStatusError,
        anthropic.AnthropicError,
        "Anthropic SDK",
    )

    def __init__(
        self,
        spec: ModelSpec,
        api_key: str,
        *,
        timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        limiter: RateLimiter | None = None,
        temperature: TemperaturePolicy = "auto",
        prompt_cache: bool = True,
        max_pacing_s: float = DEFAULT_MAX_PACING_S,
        busy: BusyServer | None = None,
        busy_wait_s: float = 0.0,
    ) -> None:
        if not isinstance(api_key, str) or not api_key.strip():
            raise ValueError(f"an Anthropic API key is required (set {API_KEY_ENV})")
        self.wire = WireFormat.of(spec, temperature, prompt_cache)
        self.model = self.wire.model
        self.base_url = spec.base_url
        self.max_tokens = spec.max_tokens
        self._sending(timeout_s, limiter or RateLimiter(), max_pacing_s, busy, busy_wait_s)
        # max_retries=0: the policy layer owns retries, backoff and Retry-After; an
        # SDK retry would hide failures from it and double-count the budget. The key
        # lives only inside the SDK client (which needs it for every request).
        self._client = AsyncAnthropic(
            api_key=api_key.strip(),
            base_url=spec.base_url,
            max_retries=0,
            timeout=timeout_s,
        )
        url = self._client.base_url
        #: `host:port` of the server, for messages (never the URL's user or password).
        self.server = server_address(url.host, url.port, url.scheme)

    def _sdk(self) -> AsyncAnthropic:
        return self._client

    def _api_key(self) -> str | None:
        key = self._client.api_key
        return key if isinstance(key, str) and key else None

    def __repr__(self) -> str:
        where = f", base_url={redact(self.base_url)!r}" if self.base_url else ""
        return f"AnthropicBackend(model={self.model!r}{where})"

    __str__ = __repr__

    async def __aenter__(self) -> AnthropicBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.close()

    def _status_error(self, exc: anthropic.APIStatusError) -> ModelCallError:
        status = exc.status_code
        err_type = getattr(exc, "type", None)
        api_message = getattr(exc, "api_message", None)
        detail = f"HTTP {status}"
        if isinstance(err_type, str) and err_type:
            detail += f" {err_type}"
        if isinstance(api_message, str) and api_message:
            detail += f": {api_message}"
        return ModelCallError(
            classify_status(status),
            self._scrub(f"Anthropic API error {detail}"),
            status=status,
            retry_after_s=parse_retry_after(exc.response.headers),
            infrastructure=self._infrastructure(status, detail),
        )

    async def check(self) -> None:
        """One cheap request before the first trial: the server answers, accepts the key,
        has the model and answers in the API's shapes (`models.retrieve`; a server without
        that endpoint answers 404 or another 4xx, so that is confirmed by a one-token
        message). Raises `InfrastructureError`; a rate limit or an overload is not a
        reason to refuse the run."""
        failure = await self._try(self._lookup_model)
        if failure is not None and lookup_unserved(failure.status):
            failure = await self._try(lambda: self._ping(self._check_s))
        if failure is None:
            await self._learn_slots(self.base_url)
            return
        reason = failure.infrastructure
        if reason is not None:
            log.debug("anthropic check failed model=%s server=%s", self.model, self.server)
            raise InfrastructureError(reason)

    async def _lookup_model(self) -> ModelCallError | None:
        client = self._client.with_options(timeout=self._check_s)
        raw = await client.models.with_raw_response.retrieve(self.model)
        asked = f"the lookup of model {self.model}"
        content_type = raw.headers.get("content-type")
        judged = self._judged(
            await raw.read(), content_type, asked, model_description, "a model description"
        )
        return judged if isinstance(judged, ModelCallError) else None

    async def _ping(self, timeout_s: float) -> ModelCallError | None:
        client = self._client.with_options(timeout=timeout_s)
        raw = await client.messages.with_raw_response.create(
            model=self.model,
            max_tokens=1,
            messages=[{"role": "user", "content": "ping"}],
        )
        content_type = raw.headers.get("content-type")
        judged = self._judged(
            await raw.read(), content_type, _MESSAGES_REQUEST, messages_reply, _MESSAGES_REPLY
        )
        return judged if isinstance(judged, ModelCallError) else None

    async def _post(self, body: WireRequest, timeout_s: float) -> Posted | Refused:
        named = {k: body[k] for k in SDK_FIELDS if k in body}
        extra = {k: v for k, v in body.items() if k not in SDK_FIELDS}
        failure: Refused | None = None
        try:
            raw = await self._client.messages.with_raw_response.create(
                **cast(Any, named), extra_body=extra or None, timeout=timeout_s
            )
            headers = lower_headers(raw.headers)
            body_bytes = await raw.read()
        except Exception as exc:  # every failure becomes a ModelCallError
            failure = Refused(self._wrap(exc), self._headers_of(exc))
        if failure is not None:
            # Returned outside the handler so that neither __cause__ nor __context__ keeps
            # the SDK exception, which holds the request (and its auth header).
            return failure
        content_type = headers.get("content-type")
        reply = self._judged(
            body_bytes, content_type, _MESSAGES_REQUEST, messages_reply, _MESSAGES_REPLY
        )
        if isinstance(reply, ModelCallError):
            return Refused(reply, headers)
        return Posted(reply, headers, _used_tokens(reply))

    async def complete(self, request: ModelRequest) -> ModelResponse:
        body, name_map = self.wire.render(request)
        log.debug(
            "anthropic call agent=%s model=%s messages=%d tools=%d",
            request.agent,
            self.model,
            len(cast(list[object], body["messages"])),
            len(cast(list[object], body["tools"])),
        )
        try:
            reply = await self.send(body)
        except ModelCallError as err:
            log.debug(
                "anthropic call failed agent=%s code=%s status=%s",
                request.agent,
                err.code,
                err.status,
            )
            raise
        response = parse_reply(reply, name_map)
        log.debug(
            "anthropic reply agent=%s stop=%s in=%d out=%d calls=%d final=%s",
            request.agent,
            response.stop_reason,
            response.usage.input_tokens,
            response.usage.output_tokens,
            len(response.calls),
            response.final is not None,
        )
        return response


_MESSAGES_REQUEST = "a Messages API request"
_MESSAGES_REPLY = "a Messages API reply"


def _used_tokens(reply: JsonObject) -> int:
    usage = reply.get("usage")
    if not isinstance(usage, dict):
        return 0
    names = ("input_tokens", "output_tokens", "cache_read_input_tokens",
             "cache_creation_input_tokens")  # fmt: skip
    return sum(as_int(usage.get(n)) for n in names)
