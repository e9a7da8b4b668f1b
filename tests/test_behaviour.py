"""What an agent does (errorflow.scenario.spec.behaviour): one object per behaviour, with
the traits the rest of the code reads, and the role presets."""

from __future__ import annotations

import pytest

from errorflow.models.backend import NeedView
from errorflow.scenario.spec.behaviour import (
    BEHAVIOURS,
    FALLBACK,
    ROLE_PRESETS,
    behaviour_of,
)


def need(id_: str, tool: str) -> NeedView:
    return NeedView(id_, tool, "name", id_, id_)


NEEDS = [need("x", "q"), need("y", "q"), need("z", "r")]


def test_each_behaviour_answers_for_its_own_needs() -> None:
    tools = ["q"]
    assert [n.id for n in BEHAVIOURS["gather"].own_needs(tools, NEEDS)] == ["x", "y"]
    assert [n.id for n in BEHAVIOURS["synthesise"].own_needs(tools, NEEDS)] == ["x", "y", "z"]
    assert [n.id for n in BEHAVIOURS["check"].own_needs(tools, NEEDS)] == ["x", "y", "z"]
    assert BEHAVIOURS["route"].own_needs(tools, NEEDS) == []
    assert [n.id for n in BEHAVIOURS["python"].own_needs(tools, NEEDS)] == ["x", "y"]


def test_the_traits_of_each_behaviour() -> None:
    def having(trait: str) -> set[str]:
        return {name for name, b in BEHAVIOURS.items() if getattr(b, trait)}

    # python: the user's code calls the tools and answers for the needs they serve.
    assert having("calls_tools") == {"gather", "synthesise", "check", "python"}
    assert having("gathers") == {"gather", "synthesise", "python"}
    assert having("carries") == {"gather", "route"}
    assert having("verifies") == {"synthesise", "check"}
    assert having("delivers") == {"synthesise"}
    assert having("reviews") == {"check"}
    assert all(b.name == name and b.instructions for name, b in BEHAVIOURS.items())
    acting = {name: b.simulated_as for name, b in BEHAVIOURS.items()}
    assert acting == {
        "gather": "research",
        "synthesise": "write",
        "check": "review",
        "route": "pass",
        "python": "research",
    }


@pytest.mark.parametrize(
    ("role", "declared", "expected"),
    [
        ("researcher", None, "gather"),
        ("writer", None, "synthesise"),
        ("reviewer", None, "check"),
        ("researcher", "route", "route"),  # a declared behaviour wins over the preset
        ("triage", "gather", "gather"),
        ("triage", None, FALLBACK),  # a hand-built model request with a role of its own
    ],
)
def test_behaviour_of(role: str, declared: str | None, expected: str) -> None:
    assert behaviour_of(role, declared) is BEHAVIOURS[expected]


def test_every_preset_names_a_behaviour() -> None:
    assert set(ROLE_PRESETS.values()) <= set(BEHAVIOURS)
