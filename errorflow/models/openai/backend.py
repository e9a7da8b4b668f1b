"""An OpenAI-compatible Chat Completions API as a model backend's client.

One client per (server, model) of a run, shared by its trials, through the official SDK
(`AsyncOpenAI`, ``max_retries=0``: retries and backoff of what the experiment measures
are owned by the policy layer, errorflow.policies.retry, which must see every failure).
It serves OpenAI and every server that speaks Chat Completions: vLLM, Ollama, llama.cpp's
server, LM Studio, LiteLLM (`base_url` ends in `/v1` for them all). The request body and
the reply are the `ChatWire`'s (errorflow/models/openai/wire.py); the served path around
it (response cache, cassette, traffic log) is every backend's.

Failures become `ModelCallError` with a taxonomy code, decided from the exception type,
the HTTP status and the shape of the reply (errorflow/models/server_reply.py), never from
message text:

====================================  =====================  ==========  =====
what happened                         code                   retryable   infra
====================================  =====================  ==========  =====
429                                   paced, not raised (errorflow/models/paced.py)
408                                   timeout                yes
409                                   transient              yes
5xx                                   transient              yes         yes
no answer within `timeout_s`          infra_fault            no          yes
connection failure                    transient              yes         yes
401, 403 (key refused), 402           permission_denied      no          yes
404 (no such model)                   model_error            no          yes
400, 413, 422, other 4xx              model_error            no          yes
a 200 that is not a Chat Completion   infra_fault            no          yes
unusable reply (cut at the limit)     model_error            no
====================================  =====================  ==========  =====

"infra" failures are errorflow's infrastructure, not the experiment: the error carries
one line naming the server (`ModelCallError.infrastructure`), and a call that fails for
good that way makes its trial an infra fault, never an outcome. A 5xx is retried by the
policy layer like any transient failure (a server that answers the next attempt took
part in the experiment); one still failing when the policy gives up is a server that is
down, not a model's behaviour. Injected 5xx faults (errorflow/models/model_faults.py)
are the experiment's and stay outcomes. A 429 is waited out by the shared limiter, fed
by its `retry-after` and every reply's `x-ratelimit-*` headers
(errorflow/models/openai/limits.py). `check` asks the server once before the first
trial (reachable, key accepted, model present, answering the API's shapes) and raises
`InfrastructureError`.

The API key is handed to the SDK client and nowhere else: it is not kept on the backend,
not shown by ``repr``, not logged, and every error message is scrubbed (literal key and
`redact` patterns) before it leaves this module.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, cast

import openai
from openai import AsyncOpenAI

from errorflow.core.redact import redact
from errorflow.models.backend import (
    InfrastructureError,
    ModelCallError,
    ModelRequest,
    ModelResponse,
)
from errorflow.models.busy_server import BusyServer
from errorflow.models.openai.limits import limiter_headers
from errorflow.models.openai.wire import OPENAI_BASE_URL, ChatWire
from errorflow.models.paced import DEFAULT_MAX_PACING_S, Posted, Refused
from errorflow.models.rate_limit import RateLimiter
from errorflow.models.sdk.backend import SdkBackend, SdkErrors, lookup_unserved, lower_headers
from errorflow.models.sdk.failures import (
    classify_status,
    parse_retry_after,
    server_address,
)
from errorflow.models.server_reply import (
    chat_completion,
    model_description,
)
from errorflow.models.serving import DEFAULT_REQUEST_TIMEOUT_S
from errorflow.models.wire import WireRequest
from errorflow.protocol.envelope import JsonObject
from errorflow.scenario.spec.model import ModelSpec

log = logging.getLogger(__name__)

API_KEY_ENV = "OPENAI_API_KEY"

_REQUEST = "a Chat Completions request"
_REPLY = "a Chat Completions reply"
#: The body fields `chat.completions.create` takes by name; the rest go in `extra_body`,
#: so the body sent is the one rendered, field for field.
_SDK_FIELDS = ("model", "messages")


class OpenAIBackend(SdkBackend):
    """The transport of the openai backend: `send` (a request body in, the reply's JSON
    body out, paced by the shared `limiter`) and `check`."""

    errors = SdkErrors(
        openai.APITimeoutError,
        openai.APIConnectionError,
        openai.APIStatusError,
        openai.OpenAIError,
        "OpenAI SDK",
    )

    def __init__(
        self,
        spec: ModelSpec,
        api_key: str,
        *,
        timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        limiter: RateLimiter | None = None,
        temperature: str = "auto",
        max_pacing_s: float = DEFAULT_MAX_PACING_S,
        busy: BusyServer | None = None,
        busy_wait_s: float = 0.0,
    ) -> None:
        if not isinstance(api_key, str) or not api_key.strip():
            raise ValueError(f"an OpenAI API key is required (set {API_KEY_ENV})")
        self.wire = ChatWire.of(spec, temperature)
        self.model = self.wire.model
        self.base_url = spec.base_url
        self._sending(timeout_s, limiter or RateLimiter(), max_pacing_s, busy, busy_wait_s)
        # The base URL is always given: the SDK would otherwise take OPENAI_BASE_URL from
        # the environment, and the server called would not be the one the labels name.
        self._client = AsyncOpenAI(
            api_key=api_key.strip(),
            base_url=spec.base_url or OPENAI_BASE_URL,
            max_retries=0,
            timeout=timeout_s,
        )
        url = self._client.base_url
        #: `host:port` of the server, for messages (never the URL's user or password).
        self.server = server_address(url.host, url.port, url.scheme)

    def _sdk(self) -> AsyncOpenAI:
        return self._client

    def _api_key(self) -> str | None:
        key = self._client.api_key
        return key if isinstance(key, str) and key else None

    def __repr__(self) -> str:
        where = f", base_url={redact(self.base_url)!r}" if self.base_url else ""
        return f"OpenAIBackend(model={self.model!r}{where})"

    __str__ = __repr__

    async def aclose(self) -> None:
        await self._client.close()

    # -- failures --------------------------------------------------------------------

    def _server_failed(self, status: int, detail: str) -> str | None:
        """A 5xx: servers behind this API (llama.cpp, vLLM, proxies) answer one when
        they are broken, not only when loaded."""
        if status >= 500:
            return self._scrub(f"the model server at {self.server} failed ({detail})")
        return None

    def _status_error(self, exc: openai.APIStatusError) -> ModelCallError:
        status = exc.status_code
        detail = f"HTTP {status}"
        err_type = exc.type if isinstance(exc.type, str) else exc.code
        if isinstance(err_type, str) and err_type:
            detail += f" {err_type}"
        body = exc.body
        message = body.get("message") if isinstance(body, dict) else None
        if isinstance(message, str) and message:
            detail += f": {message}"
        return ModelCallError(
            classify_status(status),
            self._scrub(f"model server error {detail}"),
            status=status,
            retry_after_s=parse_retry_after(lower_headers(exc.response.headers)),
            infrastructure=self._infrastructure(status, detail),
        )

    # -- the check before the first trial ----------------------------------------------

    async def check(self) -> None:
        """One cheap request before the first trial: `GET /models/{model}`; a server
        without that route (llama.cpp's, vLLM's answer 404 or another 4xx) is asked a
        one-token completion instead. Raises `InfrastructureError`; a rate limit or a
        server error that a retry may cure is not a reason to refuse the run."""
        failure = await self._try(self._lookup_model)
        if failure is not None and lookup_unserved(failure.status):
            failure = await self._try(lambda: self._ping(self._check_s))
        if failure is None:
            await self._learn_slots(self.base_url)
            return
        if failure.infrastructure is None:
            return
        if failure.status is not None and failure.status >= 500:
            return  # load: the policy layer meets it, and gives up on it, in the trials
        log.debug("openai check failed model=%s server=%s", self.model, self.server)
        raise InfrastructureError(failure.infrastructure)

    async def _lookup_model(self) -> ModelCallError | None:
        client = self._client.with_options(timeout=self._check_s)
        raw = await client.models.with_raw_response.retrieve(self.model)
        asked = f"the lookup of model {self.model}"
        judged = self._judged(
            raw.content, raw.headers.get("content-type"), asked, model_description,
            "a model description",
        )  # fmt: skip
        return judged if isinstance(judged, ModelCallError) else None

    async def _ping(self, timeout_s: float) -> ModelCallError | None:
        client = self._client.with_options(timeout=timeout_s)
        raw = await client.chat.completions.with_raw_response.create(
            model=self.model,
            messages=[{"role": "user", "content": "ping"}],
            extra_body={self.wire.token_field: 1},
        )
        judged = self._judged(
            raw.content, raw.headers.get("content-type"), _REQUEST, chat_completion, _REPLY
        )
        return judged if isinstance(judged, ModelCallError) else None

    # -- sending -----------------------------------------------------------------------

    async def _post(self, body: WireRequest, timeout_s: float) -> Posted | Refused:
        named = {k: body[k] for k in _SDK_FIELDS if k in body}
        extra = {k: v for k, v in body.items() if k not in _SDK_FIELDS}
        failure: Refused | None = None
        try:
            raw = await self._client.chat.completions.with_raw_response.create(
                **cast(Any, named), extra_body=extra or None, timeout=timeout_s
            )
            headers = lower_headers(raw.headers)
            body_bytes = raw.content
        except Exception as exc:  # every failure becomes a ModelCallError
            failure = Refused(self._wrap(exc), self._limits(self._headers_of(exc)))
        if failure is not None:
            # Returned outside the handler so that neither __cause__ nor __context__ keeps
            # the SDK exception, which holds the request (and its auth header).
            return failure
        reply = self._judged(body_bytes, headers.get("content-type"), _REQUEST,
                             chat_completion, _REPLY)  # fmt: skip
        if isinstance(reply, ModelCallError):
            return Refused(reply, self._limits(headers))
        return Posted(reply, self._limits(headers), _used_tokens(reply))

    def _limits(self, headers: Mapping[str, str]) -> dict[str, str]:
        """A reply's headers with its rate limits in the limiter's words, on its clock."""
        return limiter_headers(headers, self.limiter.wall())

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Render, send and parse one request (a `ModelBackend` on its own; a run goes
        through the served path, errorflow/models/served_backend.py, instead)."""
        body, names = self.wire.render(request)
        log.debug("openai call agent=%s model=%s", request.agent, self.model)
        return self.wire.parse(await self.send(body), names)


def _used_tokens(reply: JsonObject) -> int:
    usage = reply.get("usage")
    if not isinstance(usage, dict):
        return 0
    return sum(
        v if isinstance(v, int) and not isinstance(v, bool) else 0
        for v in (usage.get("prompt_tokens"), usage.get("completion_tokens"))
    )
