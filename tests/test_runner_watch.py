"""An agent process's view of its runner: gone after its last will and a few seconds of
silence, or after `--wait-timeout` of silence; a forged or replayed word changes nothing."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from errorflow.bus.endpoint import Endpoint
from errorflow.bus.mqtt import MqttBus
from errorflow.protocol import signing, topics
from errorflow.protocol.control import (
    Alive,
    End,
    Gone,
    RollCall,
    Stop,
)
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.runtime.runner_presence import runner_endpoint
from errorflow.runtime.runner_watch import RunnerGone, RunnerWatch, follow_runner
from tests.conftest import Mosquitto

S1, S2 = "a" * 16, "b" * 16


def joined_watch(silence_s: float = 10.0, will_wait_s: float = 3.0) -> RunnerWatch:
    """A watch that heard the runner's roll call (seq 100) and alive (seq 101) at t=0."""
    watch = RunnerWatch(silence_s, will_wait_s)
    watch.heard(RollCall(scenario={}), 100, 0.0)
    watch.heard(Alive(agent=topics.RUNNER, session=S1), 101, 0.0)
    return watch


def test_the_runner_is_gone_after_its_will_and_a_silence() -> None:
    watch = joined_watch()
    watch.heard(Gone(agent=topics.RUNNER, session=S1), 50, 1.0)  # signed when it connected
    assert watch.why_gone(3.9) is None
    why = watch.why_gone(4.0)
    assert why is not None and "last will" in why and "3s" in why


def test_a_runner_that_speaks_after_its_will_is_still_there() -> None:
    watch = joined_watch()
    watch.heard(Gone(agent=topics.RUNNER, session=S1), 50, 1.0)
    watch.heard(Alive(agent=topics.RUNNER, session=S1), 102, 2.0)  # it reconnected
    assert watch.why_gone(5.0) is None


def test_a_will_of_another_session_changes_nothing() -> None:
    watch = joined_watch()
    watch.heard(Gone(agent=topics.RUNNER, session=S2), 99, 1.0)  # a runner before a resume
    assert watch.why_gone(9.0) is None


def test_silence_for_the_wait_timeout_is_gone_and_zero_waits_for_ever() -> None:
    watch = joined_watch(silence_s=10.0)
    assert watch.why_gone(10.0) is None
    assert watch.why_gone(10.1) == "nothing from the runner for 10s"
    assert joined_watch(silence_s=0).why_gone(1e9) is None


def test_silence_ends_the_wait_after_a_will_if_it_comes_first() -> None:
    watch = joined_watch(silence_s=2.0, will_wait_s=5.0)
    watch.heard(Gone(agent=topics.RUNNER, session=S1), 50, 0.5)
    assert watch.why_gone(2.0) is None
    assert watch.why_gone(2.1) == "nothing from the runner for 2s"


def test_a_replayed_older_message_is_no_sign_of_life() -> None:
    watch = joined_watch(silence_s=10.0)
    watch.heard(Alive(agent=topics.RUNNER, session=S2), 7, 9.0)  # an older runner's alive
    assert watch.why_gone(10.5) is not None
    assert watch.session == S1


def test_after_stop_or_end_its_silence_is_expected() -> None:
    for last in (Stop(), End()):
        watch = joined_watch(silence_s=1.0)
        watch.heard(last, 102, 0.5)
        assert watch.why_gone(100.0) is None


def forged_gone(key: bytes | None, run_id: str, session: str, seq: int) -> bytes:
    env = Envelope(
        run_id=run_id,
        trial=0,
        seq=seq,
        sender=topics.RUNNER,
        recipient="all",
        kind=Kind.CONTROL,
        trace_id=f"{run_id}-presence",
        payload=Gone(agent=topics.RUNNER, session=session).to_payload(),
    )
    return env.encode(key)


@pytest.mark.mosquitto
@pytest.mark.slow
async def test_a_forged_gone_is_rejected_and_the_runners_will_is_heeded(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    key, run_id = signing.new_key(), "followed"
    bus = MqttBus(mosquitto.url)
    try:
        ep, presence = await runner_endpoint(
            bus, "runner", lambda c: Endpoint(c, run_id, topics.RUNNER, key=key)
        )
        joined = asyncio.Event()
        follow = asyncio.create_task(
            follow_runner(mosquitto.url, run_id, "writer", key, lambda _: True, 30, joined, 1.0)
        )
        await asyncio.sleep(0.5)  # subscribed
        await ep.control(RollCall(scenario={}), trace="presence")
        presence.start_heartbeat(0.1)
        await asyncio.wait_for(joined.wait(), 10)
        await asyncio.sleep(0.3)  # its session is known from its heartbeat
        await presence.stop_heartbeat()  # from now on the runner is silent
        topic = topics.control(run_id, topics.RUNNER)
        for forger_key in (None, signing.new_key()):  # unsigned, signed with another key
            await ep.conn.publish(topic, forged_gone(forger_key, run_id, presence.session, 1))
        await asyncio.sleep(2.0)  # twice the wait after a will
        assert not follow.done()
        will_topic, will = presence.will()  # what the broker publishes for a killed runner
        await ep.conn.publish(will_topic, will)
        with pytest.raises(RunnerGone, match="last will"):
            await asyncio.wait_for(follow, 5)
    finally:
        with contextlib.suppress(Exception):
            follow.cancel()
        await bus.close()
