"""Across the bundled scenarios the bus carries every tool failure class and every kind
of policy decision: counted from what a client we did not write (`mosquitto_sub`) saw
on a real broker, not from our own bookkeeping."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from errorflow.protocol import topics
from errorflow.runtime.runner import RunOptions, run_plan
from errorflow.scenario.bundled import bundled
from errorflow.scenario.loader import load
from errorflow.scenario.overrides import apply
from errorflow.scenario.run_plan import RunPlan
from errorflow.scenario.spec.model import Scenario
from tests.conftest import Mosquitto

#: The ten failure classes a tool (or the world behind it) produces.
TOOL_CODES = {
    "invalid_args", "transient", "timeout", "rate_limit", "permission_denied", "not_found",
    "business_rule", "empty_result", "partial_success", "unknown_tool",
}  # fmt: skip
#: Every kind of policy decision, as this test names what it sees.
DECISIONS = {
    "retry", "backoff", "breaker_open", "breaker_half_open", "breaker_closed",
    "refused_open", "limiter_rejected", "bulkhead_rejected", "repeated_call_blocked",
    "stop_no_progress", "stop_step_limit", "retries_exhausted", "stop_budget_exhausted",
}  # fmt: skip


def runs() -> Iterator[tuple[str, Scenario]]:
    """Each bundled scenario as `run` runs it (both propagations for the paired ones),
    and the cells of the sweeps that vary the policy layer."""
    for name, path in sorted(bundled().items()):
        scenario = load(path)
        yield name, scenario
        if scenario.sweep is None or name not in ("runaway-loop", "retry-storm", "outage"):
            continue
        for axis in scenario.sweep.axes:
            for label, overrides in axis.values.items():
                yield f"{name}/{label}", apply(scenario, overrides)


def _trials(scenario: Scenario) -> int:
    """Enough trials to see the mechanism: all of an outage's (they span it in time),
    60 of a loaded service's, 30 of anything else's."""
    if any(s.outages for s in scenario.services.values()):
        return scenario.trials
    return min(scenario.trials, 60 if scenario.services else 30)


def seen(capture: Path, run_ids: set[str]) -> tuple[set[str], set[str]]:
    """What the events of these runs carried (the broker may carry other tests' runs)."""
    codes: set[str] = set()
    decisions: set[str] = set()
    for line in capture.read_text(errors="replace").splitlines():
        topic, _, body = line.partition(" ")
        if "/events/" not in topic or topics.run_of(topic) not in run_ids:
            continue
        try:
            event = json.loads(body)["payload"]
        except (ValueError, KeyError, TypeError):
            continue
        kind = event.get("type")
        if kind == "tool_call" and event.get("code"):
            codes.add(event["code"])
        elif kind == "retry":
            decisions.add("retry")
            if event.get("delay_s", 0) > 0:
                decisions.add("backoff")
        elif kind == "breaker":
            decisions.add(f"breaker_{event['to']}")
        elif kind == "guard":
            decisions.add(event["code"])
        elif kind == "loop_stop":
            decisions.add(f"stop_{event['code']}")
        elif kind == "call_refused":
            decisions.add(f"{event['by']}_rejected")
        elif kind == "retries_exhausted":
            decisions.add("retries_exhausted")
        if kind == "tool_call" and event.get("code") == "circuit_open":
            decisions.add("refused_open")
    return codes, decisions


async def test_the_bus_carries_every_failure_class_and_policy_decision(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    sub_binary = shutil.which("mosquitto_sub")
    if sub_binary is None:
        pytest.fail("mosquitto_sub is needed (apt-get install mosquitto-clients)")
    capture = tmp_path / "capture.txt"
    with capture.open("w") as out:
        sub = subprocess.Popen(
            [sub_binary, "-h", "127.0.0.1", "-p", str(mosquitto.port), "-t", "errorflow/#", "-v"],
            stdout=out,
        )
        try:
            time.sleep(0.5)  # subscribed before the first run starts
            run_ids: set[str] = set()
            for label, scenario in runs():
                for propagation in ("explicit", "implicit"):
                    options = RunOptions(
                        broker=mosquitto.url,
                        db_path=tmp_path / "cov.db",
                        keep_messages=False,
                    )
                    # Fewer trials where the run does not span an outage in time.
                    plan = RunPlan.of(scenario, trials=_trials(scenario), propagation=propagation)
                    result = await run_plan(plan, options)
                    assert result.infra_faults == 0, label
                    run_ids.add(result.run_id)
                    if scenario.run_scoped:
                        break  # one arm is enough for the sequential (long) ones
            time.sleep(1.0)
        finally:
            sub.terminate()
            sub.wait(5)
    codes, decisions = seen(capture, run_ids)
    assert TOOL_CODES - codes == set()
    assert DECISIONS - decisions == set()
