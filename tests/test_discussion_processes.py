"""A discussion whose members are separate `errorflow agent` processes on Mosquitto: the
rounds travel the broker and the outcomes are the one-process run's."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.scenario.loader import load
from tests.conftest import Mosquitto
from tests.test_agent_process import awaiting_agents, run_with_processes, spawn_agent

FLAT = {
    "name": "flat-processes",
    "seed": 5,
    "trials": 8,
    "world": {"metrics": {"m.a": 10, "m.b": 20}},
    "tools": {"q": {"kind": "metric_store"}},
    "discussion": {"rounds": 2, "decides": ["z"]},
    "agents": {
        "x": {"role": "researcher", "tools": ["q"], "peers": ["y", "z"]},
        "y": {
            "role": "researcher",
            "tools": ["q"],
            "peers": ["z"],
            "faults": [{"kind": "corrupt", "p": 0.5, "claims": 1.0}],
        },
        "z": {"role": "researcher", "tools": ["q"]},
    },
    "task": {
        "prompt": "a and b",
        "needs": [
            {"id": "a", "tool": "q", "arg": "name", "wording": "a", "value": "m.a"},
            {"id": "b", "tool": "q", "arg": "name", "wording": "b", "value": "m.b"},
        ],
    },
}


@pytest.mark.mosquitto
@pytest.mark.slow
async def test_a_discussion_across_agent_processes_gives_the_one_process_outcomes(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    path = tmp_path / "flat.yaml"
    path.write_text(yaml.safe_dump(FLAT))
    s = load(path)
    run_id = "talk-run-1"
    url = f"mqtt://127.0.0.1:{mosquitto.port}"
    procs = [spawn_agent(name, run_id, url, scenario_file=path) for name in ("x", "y", "z")]
    split = await run_with_processes(
        procs, s, awaiting_agents(mosquitto, tmp_path / "a.db", run_id)
    )
    single = await run_scenario(s, RunOptions(broker=mosquitto.url, db_path=tmp_path / "b.db"))
    assert [x.outcome for x in split.scores] == [x.outcome for x in single.scores]
    assert split.summary.get("agent_faults") == single.summary.get("agent_faults")
    rounds = {m.payload.get("round") for ms in split.messages.values() for m in ms}
    assert {1, 2} <= rounds
