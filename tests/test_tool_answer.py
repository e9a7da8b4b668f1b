"""A Python tool's answer as JSON (errorflow/world/tool_answer.py): whatever JSON holds
passes as pydantic writes it; an object JSON has no form for, or a NaN, is the tool's
failure, never its `str()` (a memory address no run matches) or a `null`."""

from __future__ import annotations

import datetime
import enum
from dataclasses import dataclass

import pytest

from errorflow.world.tool_answer import UnusableAnswer, json_answer


class Tier(enum.Enum):
    GOLD = "gold"


@dataclass
class Row:
    id: int
    seen: datetime.date


class Thing:
    pass


def test_numpy_values_are_the_python_values_they_hold() -> None:
    np = pytest.importorskip("numpy")
    raw = {"n": np.int64(5), "ok": np.True_, "rates": np.array([1.5, 2.0])}
    assert json_answer("t", raw) == {"n": 5, "ok": True, "rates": [1.5, 2.0]}
    assert json_answer("t", np.float64(0.25)) == 0.25


def test_what_json_holds_passes_as_pydantic_writes_it() -> None:
    assert json_answer("t", {"a": [1, 2.5, None, True]}) == {"a": [1, 2.5, None, True]}
    assert json_answer("t", (1, 2)) == [1, 2]
    assert json_answer("t", Tier.GOLD) == "gold"
    assert json_answer("t", Row(3, datetime.date(2024, 1, 2))) == {"id": 3, "seen": "2024-01-02"}


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (Thing(), "rooms returned a Thing, which is not JSON"),
        ({"rows": [Thing()]}, r"rooms returned a Thing \(in the dict it returned\)"),
        (float("nan"), "rooms returned a NaN or infinite number"),
        ({"rate": [1.0, float("inf")]}, "rooms returned a NaN or infinite number"),
        (["x" * 1000] * 200, "rooms returned 200,601 bytes of JSON; .* at most 131,072"),
    ],
)
def test_what_json_cannot_hold_is_the_tools_failure(raw: object, said: str) -> None:
    with pytest.raises(UnusableAnswer, match=said):
        json_answer("rooms", raw)
