"""Exchange keys: one per request, experiment, trial, agent and repeat; never shared
across models, prompts or parameters."""

from __future__ import annotations

from errorflow.models.exchange import (
    Experiment,
    Place,
    exchange_key,
    record,
)
from errorflow.scenario.overrides import apply
from tests.conftest import scenario

BODY = {
    "model": "claude-test",
    "max_tokens": 512,
    "system": [{"type": "text", "text": "You are the researcher."}],
    "messages": [{"role": "user", "content": [{"type": "text", "text": "Find papers."}]}],
    "tools": [{"name": "search", "description": "d", "input_schema": {"type": "object"}}],
    "temperature": 0.2,
}
EXP = Experiment.of(scenario("contamination"))
HERE = Place(trial=3, owner="researcher")


def key(
    body: dict[str, object] = BODY, exp: Experiment = EXP, place: Place = HERE, n: int = 0
) -> str:
    return exchange_key(exp, place, body, n)


def test_the_same_request_in_the_same_place_has_the_same_key() -> None:
    reordered = dict(reversed(list(BODY.items())))
    assert key() == key(reordered)  # canonical: key order does not matter


def test_anything_the_server_reads_or_the_place_changes_the_key() -> None:
    variants = [
        key({**BODY, "model": "claude-other"}),
        key({**BODY, "temperature": 0.7}),
        key({**BODY, "max_tokens": 1024}),
        key({**BODY, "system": [{"type": "text", "text": "You are the writer."}]}),
        key({**BODY, "tools": []}),
        key({k: v for k, v in BODY.items() if k != "temperature"}),
        key(place=Place(trial=4, owner="researcher")),
        key(place=Place(trial=3, owner="researcher@r1")),
        key(n=1),
        key(exp=Experiment.of(scenario("contamination", propagation="implicit"))),
        key(exp=Experiment.of(scenario("contamination", seed=4))),
    ]
    assert len({key(), *variants}) == len(variants) + 1


def test_the_experiment_is_the_agents_view_of_the_public_scenario() -> None:
    base = scenario("contamination")
    # what only the runner decides does not make another experiment
    assert Experiment.of(base).digest == Experiment.of(scenario("contamination", trials=7)).digest
    # but the stored run's identity (scenario_sha) does change with it
    assert (
        Experiment.of(base).scenario_sha
        != Experiment.of(scenario("contamination", trials=7)).scenario_sha
    )
    changed = apply(base, {"tools.search_papers.faults.0.status": 403})
    assert Experiment.of(changed).digest != Experiment.of(base).digest


def test_a_record_keeps_what_export_and_replay_need() -> None:
    rec = record(key(), EXP, HERE, 0, BODY, {"content": []})
    assert rec["key"] == key() and rec["scenario_sha"] == EXP.scenario_sha
    assert (rec["trial"], rec["owner"], rec["model"]) == (3, "researcher", "claude-test")
