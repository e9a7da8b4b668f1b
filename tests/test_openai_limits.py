"""OpenAI's x-ratelimit-* headers in the shared limiter's words."""

from __future__ import annotations

from datetime import datetime

import pytest

from errorflow.models.openai.limits import duration_s, limiter_headers
from errorflow.models.rate_limit import reset_delay


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("20ms", 0.02),
        ("1h2m3.5s", 3723.5),
        ("12", 12.0),
        ("0.5", 0.5),
        ("soon", None),
        ("1x", None),
        ("-3", None),
        ("", None),
        ("inf", None),
    ],
)
def test_durations(text: str, seconds: float | None) -> None:
    assert duration_s(text) == (pytest.approx(seconds) if seconds is not None else None)


def test_the_budgets_are_added_in_the_limiter_s_words() -> None:
    now = 1_800_000_000.0
    headers = {
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "2.5s",
        "x-ratelimit-remaining-tokens": "9",
        "x-ratelimit-reset-tokens": "later",
        "retry-after": "3",
    }
    out = limiter_headers(headers, now)
    assert out["anthropic-ratelimit-requests-limit"] == "60"
    assert out["anthropic-ratelimit-requests-remaining"] == "0"
    reset = out["anthropic-ratelimit-requests-reset"]
    assert datetime.fromisoformat(reset).timestamp() == pytest.approx(now + 2.5)
    assert reset_delay(reset, now) == pytest.approx(2.5)
    assert out["anthropic-ratelimit-tokens-remaining"] == "9"
    assert "anthropic-ratelimit-tokens-reset" not in out  # not a duration: nothing said
    assert out["retry-after"] == "3"  # the rest is kept as it was


def test_a_server_s_own_anthropic_headers_are_not_overwritten() -> None:
    headers = {"anthropic-ratelimit-requests-remaining": "5", "x-ratelimit-remaining-requests": "0"}
    assert limiter_headers(headers, 0.0)["anthropic-ratelimit-requests-remaining"] == "5"
