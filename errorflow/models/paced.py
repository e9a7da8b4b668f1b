"""Sending one request through a rate limiter, waiting out the server's 429s.

A 429 from a real server says "not now", not "this failed": the request is sent again
once the shared limiter lets it (the 429's retry-after paused every request to that
server), and the policy layer never sees it, so a rate limit never becomes a trial's
outcome. Only a request refused for longer than `max_pacing_s` in all fails, as an
infrastructure fault (its trial is not scored) that says so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from errorflow.core.taxonomy import ErrorCode
from errorflow.models.backend import ModelCallError
from errorflow.models.rate_limit import RateLimiter
from errorflow.protocol.envelope import JsonObject

#: How long one request may wait out 429s in all before its trial is given up (10 min).
DEFAULT_MAX_PACING_S = 600.0


@dataclass(frozen=True)
class Posted:
    """The server answered 200: the reply's JSON body and its headers."""

    reply: JsonObject
    headers: Mapping[str, str] = field(default_factory=dict)
    used_tokens: int = 0  # what the reply's usage says it cost (input and output)


@dataclass(frozen=True)
class Refused:
    """The request failed: the error to raise (or, a 429, to wait out) and the headers."""

    error: ModelCallError
    headers: Mapping[str, str] = field(default_factory=dict)


Post = Callable[[], Awaitable[Posted | Refused]]


async def send_paced(
    post: Post,
    limiter: RateLimiter,
    *,
    estimate: int,
    server: str,
    max_pacing_s: float = DEFAULT_MAX_PACING_S,
) -> JsonObject:
    """`post` once per slot of `limiter` until it is not a 429; the reply's body. The
    429s are given up on once the pauses they asked for pass `max_pacing_s` (a
    `retry-after: 0` refused again pauses for the backoff: `RateLimiter.rate_limited`)."""
    paced = 0.0
    while True:
        async with limiter.slot(estimate):
            outcome = await post()
        limiter.observe(outcome.headers)
        if isinstance(outcome, Posted):
            limiter.settle(estimate, outcome.used_tokens)
            return outcome.reply
        err = outcome.error
        if err.status != 429:
            raise err
        limiter.refund(estimate)
        paced += limiter.rate_limited(err.retry_after_s)
        if paced > max_pacing_s:
            reason = (
                f"the model server at {server} kept answering 429 (rate limited) for "
                f"{paced:.0f}s; lower --max-concurrency or --rpm"
            )
            raise ModelCallError(ErrorCode.RATE_LIMIT, reason, status=429, infrastructure=reason)
