"""The most a run may send a real model (errorflow.models.model_estimate): an upper
bound, so every round an agent can run counts."""

from __future__ import annotations

from typing import Any

from errorflow import api
from errorflow.models.model_estimate import agent_bound
from errorflow.scenario.spec.model import Scenario


def _scenario(delegates: bool) -> Scenario:
    lead: dict[str, Any] = {"role": "writer"}
    worker: dict[str, Any] = {"role": "researcher", "tools": ["kpi"]}
    if delegates:
        lead["delegates"] = ["w"]
    else:
        worker["sends_to"] = ["lead"]
    need = {"id": "a", "tool": "kpi", "wording": "a", "value": "a"}
    return api.load(
        {
            "name": "bound",
            "trials": 3,
            "world": {"metrics": {"a": 1}},
            "tools": {"kpi": {"kind": "metric_store"}},
            "agents": {"lead": lead, "w": worker},
            "task": {"prompt": "p", "needs": [need]},
        }
    )


def test_a_manager_runs_two_rounds_and_reads_its_delegates_results() -> None:
    chain = agent_bound(_scenario(False), "lead", 0)
    manager = agent_bound(_scenario(True), "lead", 0)
    assert manager.calls == 2 * chain.calls
    # per call, both read the worker's result (upstream, or back from a delegate)
    assert manager.input_tokens == 2 * chain.input_tokens
