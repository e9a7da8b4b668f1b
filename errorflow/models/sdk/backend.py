"""What every backend that talks to a model server over a vendor SDK shares.

The Anthropic and OpenAI SDKs are generated from the same template (Stainless): the
same exception tree (a timeout is a connection error; a status error carries the
response), the same `with_raw_response`, the same client options. So one base holds
what a backend does around its SDK: a request body sent through the rate limiter
(`send_paced`), a pre-flight request's failure turned into a `ModelCallError` without
keeping the SDK's exception (and its auth header), an SDK exception mapped to the
taxonomy by type and status only, every message scrubbed to one line without the key,
and a 200 whose body is not the API's reply named as an infrastructure fault. A
backend gives its SDK's exception classes, its client, and what differs: how a status
error's body reads, and which statuses besides the refusals say the server is wrong.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from errorflow.core.redact import redact
from errorflow.core.taxonomy import ErrorCode
from errorflow.models.backend import ModelCallError
from errorflow.models.busy_server import BusyServer
from errorflow.models.paced import Posted, Refused, send_paced
from errorflow.models.rate_limit import RateLimiter
from errorflow.models.sdk.failures import KEY_REFUSED, NO_MODEL, connection_cause
from errorflow.models.server_reply import NotAReply, Shape, read_reply, refused_for_good
from errorflow.models.token_estimate import input_tokens
from errorflow.models.wire import WireRequest
from errorflow.protocol.envelope import JsonObject

#: How long the check before the first trial waits for the server (a run's calls wait
#: their own `timeout_s`).
CHECK_TIMEOUT_S = 10.0

#: The longest message a model server's failure gets (the rest is cut).
MAX_MESSAGE = 500


@dataclass(frozen=True)
class SdkErrors:
    """A vendor SDK's exception classes, as the shared mapping reads them."""

    timeout: type[Exception]  # checked before `connection`: it is a subclass
    connection: type[Exception]
    status: type[Exception]  # has `.status_code` and `.response.headers`
    base: type[Exception]  # any other error the SDK raises (a reply that fails validation)
    name: str  # "Anthropic SDK", in messages


def lower_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def lookup_unserved(status: int | None) -> bool:
    """A model lookup refused as a route the server does not serve (a 404, or a proxy's
    400 or 405), not for the key: a one-token request decides instead."""
    return status is not None and refused_for_good(status) and status not in KEY_REFUSED


class SdkBackend:
    """A backend's sending and failing half; the backend gives `_post`, `_ping`,
    `_status_error`, `_api_key`, its SDK client (`_sdk`) and its `errors`."""

    errors: ClassVar[SdkErrors]
    limiter: RateLimiter
    model: str
    server: str
    max_pacing_s: float
    timeout_s: float
    busy: BusyServer | None
    busy_wait_s: float

    def _sending(
        self,
        timeout_s: float,
        limiter: RateLimiter,
        max_pacing_s: float,
        busy: BusyServer | None,
        busy_wait_s: float,
    ) -> None:
        """How requests go out: each waits up to `timeout_s` for its reply, through
        `limiter`; after one timed out, `busy` (when given) holds the next ones while the
        server is waited for, up to `busy_wait_s` (0: the timeouts are only counted)."""
        if not timeout_s > 0:
            raise ValueError("timeout_s must be positive")
        self.timeout_s, self.limiter, self.max_pacing_s = timeout_s, limiter, max_pacing_s
        self.busy, self.busy_wait_s = busy, busy_wait_s

    async def _post(self, body: WireRequest, timeout_s: float) -> Posted | Refused:
        """`body` sent once; its reply waited for up to `timeout_s`."""
        raise NotImplementedError

    async def _ping(self, timeout_s: float) -> ModelCallError | None:
        """A one-token request: its failure when the server answered (None: a reply)."""
        raise NotImplementedError

    def _status_error(self, exc: Any) -> ModelCallError:  # Any: each SDK's status error
        raise NotImplementedError

    def _api_key(self) -> str | None:
        raise NotImplementedError

    def _headers_of(self, exc: Exception) -> dict[str, str]:
        """The headers of a failed request's response (a 429's retry-after, rate-limit
        headers), or none when the request got no response."""
        if isinstance(exc, self.errors.status):
            return lower_headers(exc.response.headers)  # type: ignore[attr-defined]
        return {}

    def _scrub(self, text: str) -> str:
        key = self._api_key()
        if key:
            text = text.replace(key, "[REDACTED_KEY]")
        text = " ".join(redact(text).split())  # one line, whatever the server sent
        return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."

    def _wrap(self, exc: Exception, waited_s: float | None = None) -> ModelCallError:
        """An SDK exception → ModelCallError, by type and status only (`waited_s`: the
        timeout the request had, when not `timeout_s`)."""
        errors = self.errors
        if isinstance(exc, errors.timeout):
            return self._silent(self.timeout_s if waited_s is None else waited_s)
        if isinstance(exc, errors.connection):
            reason = self._scrub(
                f"cannot reach the model server at {self.server} ({connection_cause(exc)})"
            )
            return ModelCallError(ErrorCode.TRANSIENT, reason, infrastructure=reason)
        if isinstance(exc, errors.status):
            return self._status_error(exc)
        if isinstance(exc, errors.base):
            return ModelCallError(
                ErrorCode.MODEL_ERROR, self._scrub(f"{errors.name} error ({type(exc).__name__})")
            )
        return ModelCallError(
            ErrorCode.INTERNAL_ERROR, self._scrub(f"model call failed ({type(exc).__name__})")
        )

    def _server_failed(self, status: int, detail: str) -> str | None:
        """The one line of a status that is neither a refusal nor load but still says the
        server is wrong (None by default: the experiment's)."""
        return None

    def _infrastructure(self, status: int, detail: str) -> str | None:
        """The one line an infrastructure status gets (None: the experiment's)."""
        if status in KEY_REFUSED:
            return self._scrub(f"the model server at {self.server} refused the API key ({status})")
        if status == NO_MODEL:
            reason = f"model {self.model} does not exist on the model server at {self.server}"
            return self._scrub(f"{reason} ({status})")
        if refused_for_good(status):
            return self._scrub(f"the model server at {self.server} refused the request ({detail})")
        return self._server_failed(status, detail)

    def _judged(
        self, body: bytes, content_type: str | None, asked: str, shape: Shape, expected: str
    ) -> JsonObject | ModelCallError:
        """A 200's body as the reply `shape` describes, or the infrastructure fault of a
        server that answered something else (`asked`: the request, in words)."""
        reply = read_reply(body, content_type, shape)
        if not isinstance(reply, NotAReply):
            return reply
        reason = self._scrub(
            f"the model server at {self.server} answered {asked} with {reply.what}, not {expected}"
        )
        return ModelCallError(ErrorCode.INFRA_FAULT, reason, infrastructure=reason)

    @property
    def _check_s(self) -> float:
        return min(self.timeout_s, CHECK_TIMEOUT_S)

    async def _try(
        self, request: Callable[[], Awaitable[ModelCallError | None]]
    ) -> ModelCallError | None:
        """A request's failure as a ModelCallError (None: it succeeded). Returned, not
        raised, so that nothing raised later keeps the SDK exception (and the request
        with its auth header) as its context."""
        try:
            async with asyncio.timeout(self._check_s):  # in all, not a read at a time
                err = await request()
        except TimeoutError:
            err = self._silent(self._check_s)
        except Exception as exc:
            err = self._wrap(exc, waited_s=self._check_s)
        return err

    def _sdk(self) -> Any:  # Any: each vendor's SDK client
        raise NotImplementedError

    async def _learn_slots(self, base_url: str | None) -> None:
        """After the check: a llama.cpp server says how many requests it answers at once
        (`GET /props`, `total_slots`, beside the API's root). Without `--max-concurrency`
        the limiter then sends no more at once: a server that answers one at a time
        would keep the others in its queue while their timeouts run. Any other answer
        (a 404 from other servers, a vendor's API is not asked) teaches nothing."""
        if base_url is None or self.limiter.limits.concurrency is not None:
            return
        root = base_url.rstrip("/").removesuffix("/v1")
        try:
            client = self._sdk().with_options(timeout=self._check_s)
            async with asyncio.timeout(self._check_s):  # in all, not a read at a time
                props = await client.get(f"{root}/props", cast_to=object)  # JSON as it is
            slots = props.get("total_slots") if isinstance(props, dict) else None
        except Exception:  # not llama.cpp's: nothing to learn, nothing to report
            return
        if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0:
            self.limiter.learn_slots(slots)

    async def wait_free(self, wait_s: float) -> str | None:
        """Waits up to `wait_s` for the server to answer a one-token request: None once it
        has (whatever it answered), else why not, in one line. A server that answers one
        request at a time (llama.cpp's) goes on with a reply whose client gave up and
        queues what comes after it, so a caller whose request timed out waits here
        before it asks again. With a `busy` state, a wait already running for this
        server is joined, not doubled (errorflow/models/busy_server.py)."""
        if self.busy is None:
            return await self._answers(wait_s)
        return await self.busy.answered(self._answers, wait_s)

    async def _answers(self, wait_s: float) -> str | None:
        """One one-token request, sent past the rate limiter and the served path (it is
        not part of any experiment): None when the server answered it within `wait_s`."""
        failure: ModelCallError | None = None
        try:
            async with asyncio.timeout(wait_s):  # in all, not a read at a time
                await self._ping(wait_s)
        except TimeoutError:
            failure = self._silent(wait_s)
        except Exception as exc:  # a reason in words: nothing keeps the SDK's exception
            answered = isinstance(exc, self.errors.base) and not isinstance(
                exc,
                self.errors.connection,  # (a timeout is one)
            )
            failure = None if answered else self._wrap(exc, waited_s=wait_s)
        return None if failure is None else failure.infrastructure or str(failure)

    async def send(self, body: WireRequest) -> JsonObject:
        """One request body → the reply's JSON body, through the rate limiter (a 429 is
        waited out, see `send_paced`); any other failure raises `ModelCallError`.

        After a request to this server timed out, the next ones are held in their slots
        until it answers again (`busy`, errorflow/models/busy_server.py), each within its
        own timeout: one held too long fails as the server's silence would have."""
        estimate = input_tokens(body)
        return await send_paced(
            lambda: self._post_watched(body, estimate),
            self.limiter,
            estimate=estimate,
            server=self.server,
            max_pacing_s=self.max_pacing_s,
        )

    async def _post_watched(self, body: WireRequest, estimate: int) -> Posted | Refused:
        """`_post` in a limiter slot: held while the server is waited for, and a timeout
        holds the requests after it (see `send`)."""
        busy = self.busy
        if busy is None:
            return await self._post_within(body, self.timeout_s)
        left = await busy.hold(self.timeout_s)
        if left is None:
            self.limiter.unsent(estimate)
            return Refused(
                self._silent(self.timeout_s, " (still busy after a request that timed out)")
            )
        started = time.monotonic()
        outcome = await self._post_within(body, left)
        if isinstance(outcome, Posted):
            busy.replied(time.monotonic() - started)
        elif outcome.error.timed_out:
            busy.timed_out(self._answers, self.busy_wait_s)
        return outcome

    async def _post_within(self, body: WireRequest, timeout_s: float) -> Posted | Refused:
        """`_post`, answered within `timeout_s` in all: the SDKs' timeout bounds each read
        of the reply, so a server writing it a little at a time would outlast it."""
        try:
            async with asyncio.timeout(timeout_s):
                return await self._post(body, timeout_s)
        except TimeoutError:  # `_post` returns its own failures: this is the deadline's
            return Refused(self._silent(self.timeout_s))

    def _silent(self, waited_s: float, why: str = "") -> ModelCallError:
        """A request the server did not answer in time: an infrastructure fault."""
        reason = f"the model server at {self.server} did not answer in {waited_s:g}s{why}"
        return ModelCallError(ErrorCode.INFRA_FAULT, reason, infrastructure=reason, timed_out=True)
