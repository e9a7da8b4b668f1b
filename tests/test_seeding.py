"""Named streams: the same names, the same draws; a lazy one seeded only when drawn."""

from __future__ import annotations

from errorflow.core.seeding import LazyStream, stream


def test_a_lazy_stream_draws_what_its_stream_draws() -> None:
    eager, lazy = stream(7, 3, "a", "retry"), LazyStream(7, 3, "a", "retry")
    assert [lazy.uniform(0.0, 2.0) for _ in range(5)] == [eager.uniform(0.0, 2.0) for _ in range(5)]
    assert lazy.uniform(0.0, 1.0) != LazyStream(7, 4, "a", "retry").uniform(0.0, 1.0)


def test_a_lazy_stream_is_seeded_only_when_drawn_from() -> None:
    lazy = LazyStream(7, 3, "a", "retry")
    assert lazy._rng is None  # made for a gate that never retried: nothing seeded
    lazy.uniform(0.0, 1.0)
    assert lazy._rng is not None
