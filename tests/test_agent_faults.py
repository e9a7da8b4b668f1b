"""Agent faults (errorflow.faults.agent): each fires at its configured rate, the
wrong values are plausible, and a run counts the trials where a fault never fired."""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

import pytest

from errorflow import api
from errorflow.cli.main import main
from errorflow.faults.agent import (
    AgentFaults,
    CorruptFault,
    DropFault,
    FaultyFault,
    HangFault,
    SlowFault,
    apply_copy,
    wrong_value,
)
from errorflow.protocol.claims import Claim, FinalAnswer

ANSWER = FinalAnswer(claims=[Claim(f"k{i}", 1000 + i) for i in range(5)])


def _within_3_sigma(hits: int, n: int, p: float) -> bool:
    return abs(hits - n * p) <= 3 * math.sqrt(n * p * (1 - p))


@pytest.mark.parametrize(
    "fault",
    [
        DropFault(kind="drop", p=0.2),
        HangFault(kind="hang", p=0.35),
        SlowFault(kind="slow", p=0.1, delay_s=5),
        CorruptFault(kind="corrupt", p=0.25, claims=1.0),
    ],
)
def test_message_faults_fire_at_their_rate(fault: object) -> None:
    faults = AgentFaults([fault], random.Random(7), [])  # type: ignore[list-item]
    n = 4000
    hits = sum(bool(faults.copy_for("writer", ANSWER).fired) for _ in range(n))
    assert _within_3_sigma(hits, n, fault.p)  # type: ignore[attr-defined]


def test_corrupt_rewrites_a_share_of_the_claims_of_a_corrupted_message() -> None:
    faults = AgentFaults([CorruptFault(kind="corrupt", p=1.0, claims=0.6)], random.Random(1), [])
    rewritten = total = 0
    for _ in range(1000):
        copy = faults.copy_for("c", ANSWER)
        changed = [
            a.key
            for a, b in zip(copy.answer.claims, ANSWER.claims, strict=True)
            if a.value != b.value
        ]
        assert sorted(changed) == sorted(copy.fired[0].claims) if changed else not copy.fired
        rewritten += len(changed)
        total += len(ANSWER.claims)
    assert _within_3_sigma(rewritten, total, 0.6)


def test_faulty_model_errs_per_claim_and_believes_it() -> None:
    faults = AgentFaults([FaultyFault(kind="faulty", p=0.3)], random.Random(3), [])
    wrong = 0
    for _ in range(800):
        final, _ = faults.believe(ANSWER)
        wrong += sum(a.value != b.value for a, b in zip(final.claims, ANSWER.claims, strict=True))
    assert _within_3_sigma(wrong, 800 * 5, 0.3)


def test_to_limits_a_fault_to_some_recipients_without_moving_the_draws() -> None:
    only = AgentFaults([DropFault(kind="drop", p=0.5, to=["runner"])], random.Random(5), [])
    every = AgentFaults([DropFault(kind="drop", p=0.5)], random.Random(5), [])
    for _ in range(50):
        assert not only.copy_for("writer", ANSWER).fired
        every.copy_for("writer", ANSWER)
    assert [bool(only.copy_for("runner", ANSWER).fired) for _ in range(30)] == [
        bool(every.copy_for("runner", ANSWER).fired) for _ in range(30)
    ]


@pytest.mark.parametrize("value", [1284000000, 0.043, "alpha", ["a", "b"], {"x": 1}, True])
def test_wrong_values_keep_their_type_and_differ(value: object) -> None:
    rng = random.Random(0)
    for _ in range(50):
        wrong = wrong_value(value, rng, ["alpha", "beta", ["a", "c"]])  # type: ignore[arg-type]
        assert type(wrong) is type(value) or isinstance(value, int | float)
        assert wrong != value


def test_a_withheld_copy_carries_no_claims() -> None:
    faults = AgentFaults([HangFault(kind="hang", p=1.0)], random.Random(0), [])
    copy = faults.copy_for("c", ANSWER)
    wire = apply_copy({"answer": {}, "trace": {}}, copy)
    assert wire["withheld"] == "hang" and wire["answer"]["claims"] == []  # type: ignore[index]


CHAIN = {
    "name": "chain",
    "seed": 4,
    "trials": 60,
    "world": {"metrics": {"m.a": 10, "m.b": 20}},
    "tools": {"q": {"kind": "metric_store"}},
    "agents": {
        "a": {"role": "researcher", "tools": ["q"], "sends_to": ["b"]},
        "b": {"role": "writer"},
    },
    "task": {
        "prompt": "a and b",
        "needs": [
            {"id": "a", "tool": "q", "arg": "name", "wording": "a", "value": "m.a"},
            {"id": "b", "tool": "q", "arg": "name", "wording": "b", "value": "m.b"},
        ],
    },
}


def _run(faults: list[dict[str, object]], propagation: str = "explicit") -> api.Result:
    data = {**CHAIN, "propagation": propagation}
    data["agents"] = {**CHAIN["agents"], "a": {**CHAIN["agents"]["a"], "faults": faults}}  # type: ignore[dict-item]
    return api.run(api.load_scenario(data))


def test_a_run_counts_where_each_fault_fired_and_where_it_never_did() -> None:
    res = _run([{"kind": "drop", "p": 0.3}])
    counts = res.raw.summary["agent_faults"]["a.drop"]
    assert counts["fired"] + counts["never"] == 60
    assert 0 < counts["fired"] < 60
    assert _within_3_sigma(counts["fired"], 60, 0.3)


def test_a_dropped_message_is_reported_downstream_when_explicit_and_swallowed_when_not() -> None:
    explicit = _run([{"kind": "drop", "p": 1.0}])
    implicit = _run([{"kind": "drop", "p": 1.0}], "implicit")
    # told of the timed-out wait, the writer mostly heeds it (p_heed_upstream 0.85)
    assert explicit.outcomes["success"] == 0 and explicit.outcomes["contained"] >= 45
    assert implicit.outcomes["success"] == 0
    # swallowed, the empty input reads as "nothing found" and the writer fills it in
    assert implicit.outcomes["contaminated"] > 2 * explicit.outcomes["contaminated"]


def test_corruption_contaminates_the_answer_it_reaches() -> None:
    clean = _run([])
    corrupt = _run([{"kind": "corrupt", "p": 0.5, "claims": 1.0}])
    fired = {
        t
        for t, msgs in corrupt.raw.messages.items()
        if any(m.payload.get("trace", {}).get("faults") for m in msgs)
    }
    assert 0 < len(fired) < 60
    before = {s.trial: s.outcome for s in clean.raw.scores}
    for score in corrupt.raw.scores:
        if score.trial in fired:  # every claim rewritten, stated as certain by the writer
            assert score.outcome.value == "contaminated"
        else:  # the fault has its own draws: everything else is the clean run's
            assert score.outcome == before[score.trial]


def test_trace_names_the_injected_fault_as_the_origin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "t.db")
    assert main(["run", "lineage-guard", "--trials", "8", "--db", db, "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert main(["trace", run_id, "--db", db]) == 0
    out = capsys.readouterr().out
    assert "origin  agent fault: b's result to c" in out
    assert "injected agent fault: corrupt:" in out


def test_model_faults_and_crashes_are_counted_per_trial_like_agent_faults() -> None:
    data = {**CHAIN, "trials": 80}
    writer = {
        "role": "writer",
        "model": {"faults": [{"kind": "overloaded", "p": 0.3}]},
        "faults": [{"kind": "crash", "p": 0.1}],
    }
    data["agents"] = {**CHAIN["agents"], "b": writer}  # type: ignore[dict-item]
    res = api.run(api.load_scenario(data))
    model = res.raw.summary["model_faults"]["agents.b.model.faults[0]"]
    crash = res.raw.summary["agent_faults"]["b.crash"]
    assert model["fired"] + model["never"] == 80 == crash["fired"] + crash["never"]
    assert 0 < crash["fired"] < 80 and 0 < model["fired"] < 80
    # a crashed trial is an injected failure, never an infrastructure one
    assert res.outcomes["infra_fault"] == 0


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ({"kind": "corupt", "p": 0.2}, "found 'corupt' (a string); did you mean 'corrupt'?"),
        ({"p": 0.2}, "missing required field 'kind'"),
        ({"kind": "drop", "p": 0.2, "to": ["writr"]}, "unknown recipient 'writr'"),
        ({"kind": "slow", "p": 1.5}, "expected a probability from 0 to 1, found 1.5"),
    ],
)
def test_a_bad_agent_fault_is_refused_in_words(fault: dict[str, object], message: str) -> None:
    from errorflow.scenario.loader import ScenarioError

    data = {**CHAIN}
    data["agents"] = {**CHAIN["agents"], "a": {**CHAIN["agents"]["a"], "faults": [fault]}}  # type: ignore[dict-item]
    with pytest.raises(ScenarioError, match=re.escape(message)):
        api.load_scenario(data)
