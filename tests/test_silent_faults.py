"""Silent wrong answers on their own (errorflow.faults.tool, errorflow.world.other_entities):
what each kind makes of a right answer, and that a wrong answer is never an empty one."""

from __future__ import annotations

import random

import pytest
from pydantic import JsonValue

from errorflow.faults.tool import CorruptAnswerFault, StaleFault
from errorflow.faults.tool_answers import relabelled
from errorflow.scenario.loader import load_text
from errorflow.world.other_entities import other_calls


def stale(value: JsonValue, fault: StaleFault) -> JsonValue:
    return fault.after(value, random.Random(0))


def corrupt(value: JsonValue, fault: CorruptAnswerFault, rng: random.Random) -> JsonValue:
    return fault.after(value, rng)


def test_stale_moves_numbers_and_drops_the_end_of_lists_but_never_empties() -> None:
    fault = StaleFault(kind="stale")
    assert stale(200, fault) == 180 and stale(0.5, fault) == pytest.approx(0.45)
    assert stale(1, fault) == pytest.approx(0.9)  # rounding would keep it right: a float
    assert stale(["a", "b", "c"], fault) == ["a", "b"]
    assert stale(["only"], StaleFault(kind="stale", drop=3)) == ["only"]
    assert stale({"ok": True, "n": 10, "name": "x"}, fault) == {"ok": True, "n": 9, "name": "x"}
    assert stale("text", fault) == "text"  # a stale text needs `value:`
    assert stale(5, StaleFault(kind="stale", value="then")) == "then"


def test_corrupt_modes() -> None:
    rng = random.Random(0)
    assert corrupt(
        {"n": 7, "tags": ["a", "b", "c", "d"]}, CorruptAnswerFault(kind="corrupt"), rng
    ) == {
        "n": 7000,
        "tags": ["a", "b"],
    }
    assert corrupt([1.5, 2], CorruptAnswerFault(kind="corrupt", mode="unit"), rng) == [1500.0, 2000]
    assert corrupt("abcdef", CorruptAnswerFault(kind="corrupt", mode="truncate"), rng) == "abc"
    assert corrupt("x", CorruptAnswerFault(kind="corrupt", mode="truncate"), rng) == "x"
    assert corrupt("T-4711", CorruptAnswerFault(kind="corrupt", mode="digits"), rng) in (
        "T-7411",
        "T-4171",
    )
    assert corrupt(True, CorruptAnswerFault(kind="corrupt"), rng) is True


def test_another_entitys_calls_are_drawn_and_never_the_call_itself() -> None:
    sc = load_text(
        """
name: e
world: {metrics: {a: 1, b: 2, c: 3}}
tools: {m: {kind: metric_store}}
agents: {r: {role: researcher, tools: [m]}}
task: {prompt: p, needs: [{id: a, tool: m, wording: a, value: a}]}
"""
    )
    calls = list(other_calls(sc, "m", {"name": "a"}, random.Random(1)))
    assert sorted(c["name"] for c in calls) == ["b", "c"]
    assert calls == list(other_calls(sc, "m", {"name": "a"}, random.Random(1)))


def test_a_batch_about_other_items_is_filed_under_the_items_asked_for() -> None:
    assert relabelled({"d2": "two", "d3": "three"}, {"d1": "one", "d2": "two"}) == {
        "d1": "two",
        "d2": "three",
    }
