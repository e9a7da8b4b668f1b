"""The scenario model on its own: cross-references, the tool-kind catalog and the
behaviour profiles it is checked against, and a stable identity."""

from __future__ import annotations

from typing import Any, get_args

import pytest
from pydantic import ValidationError

from errorflow.scenario.loader import load_text
from errorflow.scenario.spec import identity
from errorflow.scenario.spec.catalog import (
    ARG_MODELS,
    BATCH_KINDS,
    DESCRIPTIONS,
    ToolKind,
    input_schema,
)
from errorflow.scenario.spec.model import Scenario
from errorflow.scenario.spec.profiles import (
    PROFILES,
    Tendencies,
    profile_with,
    tendencies,
)

TEXT = """\
name: identity
seed: 7
tools:
  metrics: {kind: metric_store, faults: [{kind: transient, p: 0.3}]}
agents:
  researcher:
    role: researcher
    tools: [metrics]
    policy: {retry: {max_attempts: 2}, strategy: classify}
    sends_to: [writer, reviewer]
  writer:
    role: writer
    model: {profile: frontier, params: {p_heed_upstream: 0.5}}
  reviewer:
    role: reviewer
    policy: {guards: {max_steps: 9}}
task:
  prompt: Report the revenue.
  needs:
    - {id: revenue, tool: metrics, wording: the revenue, value: rev}
"""


def test_identity_of_a_file_is_stable() -> None:
    """The sha the store and joining agents compare: recorded before the policy blocks
    were typed, so stored runs stay resumable."""
    s = load_text(TEXT)
    assert identity.sha(s) == "4f7360142a31a5ae54adaaf244b9c780b4f2586e195fd84b623bf1984dec3aa1"
    dumped = s.model_dump(mode="json")["agents"]
    assert dumped["researcher"]["policy"] == {"retry": {"max_attempts": 2}, "strategy": "classify"}
    assert dumped["writer"]["policy"] == {"strategy": "resilient"}
    assert dumped["reviewer"]["policy"] == {"guards": {"max_steps": 9}}
    assert identity.sha(Scenario.model_validate_json(s.model_dump_json())) == identity.sha(s)


def _data() -> dict[str, object]:
    return {
        "name": "refs",
        "tools": {"m": {"kind": "metric_store"}, "f": {"kind": "batch_fetch"}},
        "agents": {
            "a": {"role": "researcher", "tools": ["m"], "sends_to": ["b"]},
            "b": {"role": "writer"},
        },
        "task": {"prompt": "p", "needs": [{"id": "n", "tool": "m", "wording": "w", "value": "v"}]},
    }


def _errors(**changes: object) -> list[tuple[tuple[int | str, ...], str]]:
    data = _data()
    for path, value in changes.items():
        node: Any = data
        *parents, last = path.split("__")
        for part in parents:
            node = node[part]
        node[last] = value
    with pytest.raises(ValidationError) as info:
        Scenario.model_validate(data)
    return [(e["loc"], e["msg"]) for e in info.value.errors()]


def test_references_are_each_reported_at_their_path() -> None:
    errors = _errors(
        agents__a={"role": "researcher", "tools": ["mm"], "sends_to": ["a", "c", "b", "b"]},
        task__needs=[{"id": "n", "tool": "x", "wording": "w", "value": "v"}] * 2,
    )
    assert errors == [
        (("agents", "a", "sends_to", 0), "agent 'a' sends to itself"),
        (("agents", "a", "sends_to", 1), "unknown agent 'c'; expected one of: a, b"),
        (("agents", "a", "sends_to", 3), "agent 'b' is named twice"),
        (
            ("agents", "a", "tools", 0),
            "unknown tool 'mm'; did you mean 'm'? (define it under tools:)",
        ),
        (
            ("task", "needs", 0, "tool"),
            "unknown tool 'x'; expected one of: m, f (define it under tools:)",
        ),
        (("task", "needs", 1, "id"), "duplicate need id 'n' (first at task.needs.0)"),
        (
            ("task", "needs", 1, "tool"),
            "unknown tool 'x'; expected one of: m, f (define it under tools:)",
        ),
    ]


def test_a_name_shaped_like_a_secret_is_refused_at_its_path() -> None:
    """Names travel as they are (topics, senders, claim keys, tool names): one that the
    bus's redaction would change is refused, and the message does not repeat it."""
    errors = _errors(
        name="sk-live-4f9a8b7c6d5e",
        tools={"m": {"kind": "metric_store"}, "ghp_abcdefghij1234": {"kind": "batch_fetch"}},
        task__needs=[{"id": "AKIAABCDEFGHIJKLMNOP", "tool": "m", "wording": "w", "value": "v"}],
    )
    assert [loc for loc, _ in errors] == [
        ("name",),
        ("tools", "ghp_abcdefghij1234", "[key]"),
        ("task", "needs", 0, "id"),
    ]
    assert all(msg.startswith("Value error, a name shaped like a secret") for _, msg in errors)
    assert not any("sk-live" in msg or "ghp_" in msg or "AKIA" in msg for _, msg in errors)
    # a name that only begins like one (a primary key, not Stripe's pk_live_) is a name
    assert Scenario.model_validate({**_data(), "name": "pk_customer_id_v2"}).name


def test_reserved_names_returns_to_and_faults() -> None:
    errors = _errors(
        agents={
            "runner": {"role": "researcher", "sends_to": ["b"], "tools": ["m"]},
            "b": {"role": "reviewer", "returns_to": "nobody"},
        },
        tools__m={"kind": "metric_store", "faults": [{"kind": "partial"}]},
    )
    assert [loc for loc, _ in errors] == [
        ("agents", "runner"),
        ("agents", "b", "returns_to"),
        ("tools", "m", "faults", 0, "kind"),
    ]
    assert "reserved for the bus (all, observers, runner)" in errors[0][1]
    assert "sends to 'b' (runner)" in errors[1][1]
    assert "expected a batch tool (kind batch_fetch, or a lookup" in errors[2][1]
    assert "found kind 'metric_store'" in errors[2][1]
    # A field another kind owns is the fault's shape: refused before the cross-checks.
    foreign = _errors(
        tools__m={"kind": "metric_store", "faults": [{"kind": "empty", "item_p": 0.1}]}
    )
    assert [loc for loc, _ in foreign] == [("tools", "m", "faults", 0, "empty", "item_p")]


def test_a_cycle_has_no_entry_agent() -> None:
    errors = _errors(agents__b={"role": "writer", "sends_to": ["a"]})
    assert errors == [
        (
            ("agents", "a", "sends_to"),
            "no entry agent: every agent receives from another (sends_to forms a cycle: "
            "a -> b -> a); expected at least one agent that nobody sends to",
        )
    ]


def test_every_tool_kind_has_a_schema_and_a_description() -> None:
    kinds = set(get_args(ToolKind))
    assert set(ARG_MODELS) == set(DESCRIPTIONS) == kinds and kinds >= BATCH_KINDS
    for kind in get_args(ToolKind):
        assert input_schema(kind)["type"] == "object"
    assert input_schema("metric_store")["required"] == ["name"]


def test_profiles_are_complete_behaviours() -> None:
    assert set(PROFILES) >= {"small-local", "frontier"}
    assert all(isinstance(p, Tendencies) for p in PROFILES.values())
    merged = profile_with("small-local", {"p_heed_upstream": 0.1})
    assert merged["p_heed_upstream"] == 0.1 and merged["p_flag_empty"] == 0.0
    assert tendencies("small-local", {"p_heed_upstream": 0.1}) == PROFILES[
        "small-local"
    ].model_copy(update={"p_heed_upstream": 0.1})
    with pytest.raises(ValueError, match="unknown model profile"):
        tendencies("gpt-9")
