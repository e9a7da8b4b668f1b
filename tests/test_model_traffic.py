"""reports/model_traffic.py: the line a run prints of what each real model was sent."""

from __future__ import annotations

from errorflow.reports.model_traffic import TrafficJson, traffic_lines


def traffic(**given: int) -> TrafficJson:
    counts: TrafficJson = {
        "requests": 0, "rate_limited": 0, "paced_s": 0.0, "peak_in_flight": 1,
        "server_slots": None, "timed_out": 0, "checks": 0, "held": 0, "held_expired": 0,
        "waits_unanswered": 0, "replies": 0, "cache_hits": 0, "cache_misses": 0,
        "replayed": 0, "input_tokens_uncached": 0, "cache_read_tokens": 0,
        "cache_write_tokens": 0, "output_tokens": 0, "cost_usd": None,
    }  # fmt: skip
    counts.update(given)  # type: ignore[typeddict-item]
    return counts


def test_requests_the_server_never_answered_are_told_apart() -> None:
    """A server killed mid-run: 14 attempts went out, and 2 were answered."""
    [line] = traffic_lines({"m @ 127.0.0.1:9": traffic(requests=14, replies=2, cache_misses=14)})
    assert line.startswith("model traffic: m @ 127.0.0.1:9: 14 requests, 2 answered (0 rate")


def test_the_cache_and_a_cassette_are_not_the_server_answering() -> None:
    cached = traffic(requests=3, replies=5, cache_hits=2, cache_misses=3)
    assert ": 3 requests, 3 answered (" in traffic_lines({"m": cached})[0]
