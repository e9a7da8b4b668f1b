"""The roll call carries the whole scenario: `validate` measures it as the runner sends it
and refuses a scenario whose roll call no receiver would accept (before: `validate` said
ok, and `run` waited 30 s for agents that never heard the roll call)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from errorflow.bus.transport import InProcessBus
from errorflow.protocol.envelope import MAX_MESSAGE_BYTES, MAX_PAYLOAD_VALUES, decode
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.scenario.checks.bus_fit import (
    bus_problems,
    heaviest,
    roll_call,
    roll_call_bytes,
)
from errorflow.scenario.loader import ScenarioError, validate_data
from errorflow.scenario.overrides import data_of
from errorflow.scenario.spec.model import Scenario
from tests.conftest import scenario


def _with(base: Scenario, **fields: object) -> dict[str, object]:
    return {**data_of(base), **fields}


async def test_the_runners_roll_call_is_what_validate_measures(tmp_path: Path) -> None:
    s = scenario("contamination").model_copy(update={"trials": 1})
    run_id = "r" * 55  # the longest a run id can be: its trace id is `{run_id}-presence`
    db = tmp_path / "r.db"
    await run_scenario(s, RunOptions(bus=InProcessBus(), db_path=db, run_id=run_id))
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT envelope FROM messages WHERE kind = 'control'").fetchall()
    conn.close()
    sent = [text for (text,) in rows if json.loads(text)["payload"]["action"] == "roll_call"]
    assert sent, "the run stored no roll call"
    for text in sent:
        assert json.loads(text)["payload"] == roll_call(s).to_payload()
        assert len(text.encode()) <= len(roll_call_bytes(s))  # the measure is an upper bound


def test_a_scenario_at_the_limit_fits_and_one_byte_more_does_not() -> None:
    base = scenario("contamination")
    spare = MAX_MESSAGE_BYTES - len(roll_call_bytes(base))
    fits = validate_data(_with(base, description=base.description + "x" * spare))
    assert len(roll_call_bytes(fits)) == MAX_MESSAGE_BYTES
    decode(roll_call_bytes(fits))  # what the receivers do: accepted
    with pytest.raises(ScenarioError) as info:
        validate_data(_with(base, description=base.description + "x" * (spare + 1)), "big.yaml")
    (problem,) = info.value.problems
    assert problem.path == "description"
    assert "does not fit on the bus" in problem.message
    assert f"over the bus message limit of {MAX_MESSAGE_BYTES:,}" in problem.message


def test_a_roll_call_with_too_many_values_is_refused() -> None:
    base = scenario("contamination")
    world = base.world.model_dump()
    world["metrics"] = {str(i): 0 for i in range(MAX_PAYLOAD_VALUES)}  # within the bytes
    with pytest.raises(ScenarioError) as info:
        validate_data(_with(base, world=world))
    (problem,) = info.value.problems
    assert problem.path == "world.metrics"
    assert f"more than {MAX_PAYLOAD_VALUES} values" in problem.message


def test_a_scenario_that_fits_has_no_problem() -> None:
    s = scenario("contamination")
    assert bus_problems(s, {}) == []


def test_heaviest_names_the_part_that_dominates() -> None:
    data = {"a": "x" * 10, "b": {"c": "y" * 1000, "d": "z"}}
    at, size = heaviest(data)
    assert at == ("b", "c") and size == 1002
    at, _ = heaviest({"a": "x" * 100, "b": "y" * 100})
    assert at in (("a",), ("b",))
