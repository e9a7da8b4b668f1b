"""errorflow run --compare-real: the scenario with its real models (a scripted
OpenAI-compatible server with set behaviour, tests/behaviour_server.py) and with their
calibrated simulation, on the same trials; per outcome and per agent both rates and
their paired difference."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from errorflow.calibration.compare import CompareError, compare, simulated_twin
from errorflow.scenario.bundled import scenarios_dir
from errorflow.scenario.loader import load
from errorflow.scoring.score import Outcome, TrialScore
from tests.behaviour_server import Behaviour, BehaviourServer


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENAI_API_KEY": "local"}
    return subprocess.run([sys.executable, "-m", "errorflow", *argv], capture_output=True,
                          text=True, env=env, timeout=900)  # fmt: skip


def _compare(server: BehaviourServer, profile: str, tmp_path: Path, trials: int) -> dict:
    spec = f"{{backend: openai, model: behaviour, base_url: '{server.url}'}}"
    done = _cli("run", "contamination", "--trials", str(trials), "--json", "-q",
                "--set", f"agents.researcher.model={spec}", "--set", f"agents.writer.model={spec}",
                "--compare-real", "--profile", profile, "--db", str(tmp_path / "c.db"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_real_against_its_calibrated_simulation(tmp_path: Path) -> None:
    behaviour = Behaviour(heed_upstream=0.5, fabricate_on_missing=0.6, seed=7)
    with BehaviourServer(behaviour) as server:
        done = _cli("calibrate", "--backend", "openai", "--model", "behaviour", "--base-url",
                    server.url, "--probes", "60", "--out", str(tmp_path / "m.yaml"), "-q",
                    "--families", "failed_upstream,missing_upstream,transient")  # fmt: skip
        assert done.returncode == 0, done.stderr
        doc = _compare(server, str(tmp_path / "m.yaml"), tmp_path, 60)
    rows = doc["compare_real"]
    assert set(doc["arms"]) == {"real", "simulated"}
    [traffic] = doc["model_traffic"].values()  # what the real arm sent, as the text prints
    assert traffic["requests"] >= traffic["replies"] >= 60
    assert {"outcome contaminated", "writer contaminated", "researcher contained"} <= set(rows)
    for name, row in rows.items():
        assert abs(row["diff"] - (row["real"] - row["simulated"])) < 1e-9, name
        assert row["n"] == 60
    # the real writer heeds half the failures and fabricates on 60 % of the rest: about
    # 30 % contaminated; its calibrated simulation agrees within the interval
    contaminated = rows["outcome contaminated"]
    assert 0.15 <= contaminated["real"] <= 0.45
    assert contaminated["low"] <= 0 <= contaminated["high"]
    assert doc["profiles"]["writer"]["parameters"]["p_heed_upstream"]["origin"] == "measured"


def test_a_different_simulation_is_told_apart(tmp_path: Path) -> None:
    with BehaviourServer(Behaviour(heed_upstream=0.0, fabricate_on_missing=1.0)) as server:
        doc = _compare(server, "frontier", tmp_path, 30)
    row = doc["compare_real"]["outcome contaminated"]
    assert row["real"] == 1.0 and row["simulated"] < 0.2 and row["low"] > 0


def test_only_a_scenario_with_a_real_model_compares() -> None:
    scenario = load(scenarios_dir() / "contamination.yaml")
    try:
        simulated_twin(scenario, "small-local")
    except CompareError as exc:
        assert "nothing to compare" in str(exc)
    else:
        raise AssertionError("expected a CompareError")
    done = _cli("run", "contamination", "--compare-real", "--profile", "small-local")
    assert done.returncode == 2 and "nothing to compare" in done.stderr
    done = _cli("run", "contamination", "--compare-real")
    assert done.returncode == 2 and "--profile" in done.stderr


def test_a_trial_without_a_scored_answer_is_left_out_of_every_pair() -> None:
    # trial 1 timed out in the real run (a slow model), trial 2 hit the infrastructure in
    # the simulated one: only trial 0 is a pair
    real = [TrialScore(0, Outcome.CONTAINED, 0), TrialScore(1, Outcome.BUS_FAULT, 0),
            TrialScore(2, Outcome.SUCCESS, 0)]  # fmt: skip
    simulated = [TrialScore(0, Outcome.CONTAMINATED, 1), TrialScore(1, Outcome.SUCCESS, 0),
                 TrialScore(2, Outcome.INFRA_FAULT, 0)]  # fmt: skip
    labels = {t: {"writer": "contaminated"} for t in range(3)}
    rows = {r.measure: r for r in compare(real, simulated, {0: {"writer": "contained"}}, labels)}
    assert all(r.difference["n"] == 1 for r in rows.values())
    assert rows["outcome contained"].real == 1.0 and rows["outcome contained"].simulated == 0.0
    assert rows["writer contaminated"].simulated == 1.0 and rows["writer contained"].real == 1.0
