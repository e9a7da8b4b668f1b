"""What every backend that talks to a model server over an SDK shares: a request body
sent through the rate limiter (`send_paced`), and a pre-flight request's failure turned
into a `ModelCallError` without keeping the SDK's exception (and its auth header)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from errorflow.models.backend import ModelCallError
from errorflow.models.paced import Posted, Refused, send_paced
from errorflow.models.rate_limit import RateLimiter
from errorflow.models.token_estimate import input_tokens
from errorflow.models.wire import WireRequest
from errorflow.protocol.envelope import JsonObject

#: How long the check before the first trial waits for the server (a run's calls wait
#: their own `timeout_s`).
CHECK_TIMEOUT_S = 10.0


class PacedSender:
    """A backend's sending half; the backend gives `_post` and `_wrap`."""

    limiter: RateLimiter
    server: str
    max_pacing_s: float
    timeout_s: float

    async def _post(self, body: WireRequest) -> Posted | Refused:
        raise NotImplementedError

    def _wrap(self, exc: Exception, waited_s: float | None = None) -> ModelCallError:
        raise NotImplementedError

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
            err = await request()
        except Exception as exc:
            err = self._wrap(exc, waited_s=self._check_s)
        return err

    async def send(self, body: WireRequest) -> JsonObject:
        """One request body → the reply's JSON body, through the rate limiter (a 429 is
        waited out, see `send_paced`); any other failure raises `ModelCallError`."""
        return await send_paced(
            lambda: self._post(body),
            self.limiter,
            estimate=input_tokens(body),
            server=self.server,
            max_pacing_s=self.max_pacing_s,
        )
