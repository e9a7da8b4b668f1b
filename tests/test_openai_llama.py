"""A real model, on this machine: SmolLM2-135M-Instruct served by llama.cpp's
OpenAI-compatible server (tests/llama_server.py), through the openai backend.

A bundled scenario runs end to end, both propagation arms on the same seeds, as
`errorflow run contamination --propagation both` runs it: real tokens, the model's
own tool calls, every trial scored, the traffic and its cost recorded, and not one
infrastructure fault. The model is tiny and its answers are poor; the point is that
every real part works. Its temperature is 0, so its answers depend only on the prompts.
Requests go one at a time (the server answers one at a time: a queued request would
spend its timeout waiting), and a trial may take longer than the runner's default while
another test shares the two cores.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from errorflow.models.rate_limit import RateLimits
from errorflow.models.serving import Serving, serving
from errorflow.reports.model_traffic import traffic_json
from errorflow.reports.prices import Price
from errorflow.runtime.experiment import propagation_arms, run_arms
from errorflow.runtime.runner import RunOptions
from errorflow.scenario.overrides import apply
from errorflow.scoring.score import Outcome
from tests.conftest import scenario
from tests.llama_server import LlamaServer, require_llama

TRIALS = 2
SCORED = {Outcome.SUCCESS, Outcome.CONTAINED, Outcome.CONTAMINATED}


@pytest.mark.slow
@pytest.mark.llama
@pytest.mark.timeout(1800)
async def test_a_real_model_runs_a_paired_experiment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python, gguf = require_llama()
    monkeypatch.setenv("OPENAI_API_KEY", "local")  # the server checks none
    db = tmp_path / "llama.db"
    with LlamaServer(python, gguf, tmp_path) as server:
        model = {"backend": "openai", "model": "smollm2", "base_url": server.url,
                 "max_tokens": 160, "temperature": 0}  # fmt: skip
        s = apply(
            scenario("contamination", trials=TRIALS),
            {"agents.researcher.model": model, "agents.writer.model": model, "max_in_flight": 1},
        )
        settings = Serving(RateLimits(concurrency=1), request_timeout_s=100)
        options = RunOptions(db_path=db, trial_timeout_s=900, keep_messages=False)
        with serving(settings) as served:
            done = await run_arms(propagation_arms(s), options, baseline=False)
    arms = {arm.label: arm.result for arm in done.arms}
    assert list(arms) == ["explicit", "implicit"]
    for arm in arms.values():  # both arms scored, not one infrastructure fault
        outcomes = [t.outcome for t in arm.scores]
        assert len(outcomes) == TRIALS and set(outcomes) <= SCORED, (arm.scores, server.tail())
        assert arm.infra_faults == 0 and arm.infra_reasons == []

    label = f"smollm2 @ 127.0.0.1:{server.port}"
    [(name, traffic)] = traffic_json(served, {"smollm2": Price(0.1, 0.4)}).items()
    assert name == label
    assert traffic["requests"] == traffic["replies"]  # every request answered
    assert traffic["replies"] > 0 and traffic["rate_limited"] == 0
    assert traffic["input_tokens_uncached"] > 0 and traffic["output_tokens"] > 0
    assert traffic["cost_usd"] is not None and traffic["cost_usd"] > 0

    with sqlite3.connect(db) as conn:
        calls = [json.loads(e)["payload"] for (e,) in conn.execute(
            "SELECT envelope FROM events WHERE type IN ('tool_call', 'model_call')")]  # fmt: skip
        costs = [json.loads(c) for (c,) in conn.execute("SELECT costs_json FROM trials")]
    used = [c for c in calls if c.get("tool") == "search_papers"]
    assert used and all(c["agent"] == "researcher" for c in used)  # the model's own calls
    model_calls = [c for c in calls if "input_tokens" in c]
    assert model_calls and all(c["input_tokens"] > 0 for c in model_calls)
    assert len(costs) == 2 * TRIALS and sum(c["model_calls"] > 0 for c in costs) >= TRIALS
