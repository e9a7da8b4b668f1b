"""What the runner makes of an agent's heartbeat (errorflow/runtime/participants.py):
the time outside errorflow it reports for its trials, once a process, and never again
what this process counted itself."""

from __future__ import annotations

import pytest

from errorflow.bus.transport import InProcessBus
from errorflow.core import outside_time
from errorflow.core.outside_time import OutsideTime, process_token
from errorflow.protocol.control import Alive, TrialOutside
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.runtime.participants import Participants
from errorflow.runtime.run_options import RunOptions
from errorflow.runtime.trial_tracker import TrialTracker
from errorflow.scenario.run_plan import RunPlan
from tests.conftest import scenario
from tests.fake_time import FakeTime


def heartbeat(agent: str, source: str, spent_s: float) -> Envelope:
    alive = Alive(
        agent=agent,
        session="s",
        outside=(TrialOutside(trace_id="run-t0", spent_s=spent_s, waiting=False),),
        outside_from=source,
    )
    return Envelope(
        run_id="run",
        trial=0,
        seq=1,
        sender=agent,
        recipient="runner",
        kind=Kind.CONTROL,
        trace_id="run-presence",
        payload=alive.to_payload(),
    )


@pytest.fixture
def outside(monkeypatch: pytest.MonkeyPatch) -> OutsideTime:
    fresh = OutsideTime(FakeTime().clock)
    monkeypatch.setattr(outside_time, "OUTSIDE", fresh)
    monkeypatch.setattr("errorflow.runtime.participants.OUTSIDE", fresh)
    return fresh


def participants() -> Participants:
    s = scenario("contamination")
    options = RunOptions(bus=InProcessBus(), external_agents=True)
    tracker = TrialTracker(s.terminal_agents())
    return Participants(RunPlan(s), "run", InProcessBus(), options, b"k" * 32, tracker, None)  # type: ignore[arg-type]


def test_two_agents_of_one_process_count_its_time_once(outside: OutsideTime) -> None:
    p = participants()
    p.control(heartbeat("researcher", "process-a", 2.0))
    p.control(heartbeat("writer", "process-a", 2.0))  # the same calls, said again
    assert outside.spent_s("run-t0") == 2.0
    p.control(heartbeat("writer", "process-b", 1.5))  # another process's
    assert outside.spent_s("run-t0") == 3.5


def test_what_this_process_counted_itself_is_not_counted_again(outside: OutsideTime) -> None:
    participants().control(heartbeat("researcher", process_token(), 2.0))
    assert outside.spent_s("run-t0") == 0.0
