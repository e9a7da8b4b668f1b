"""Presence: hello only on a roll call for our experiment, bye on stop."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from pydantic import JsonValue

from errorflow.agents.presence import Presence
from errorflow.bus.endpoint import Endpoint
from errorflow.core.outside_time import REPORTED_TRIALS, OutsideTime, process_token
from errorflow.protocol import signing
from errorflow.protocol.control import (
    Ack,
    Alive,
    Gone,
    RollCall,
    Stop,
    TrialOutside,
    parse_control,
)
from errorflow.protocol.envelope import Envelope
from errorflow.scenario.bundled import bundled
from errorflow.scenario.run_plan import RunPlan
from errorflow.scenario.spec import identity
from errorflow.scenario.spec.model import Scenario
from tests.conftest import scenario
from tests.fake_time import FakeTime


class Captured:
    """A connection that keeps what is published (decoded) instead of sending it."""

    client_id = "run-writer"

    def __init__(self, *, broken: bool = False) -> None:
        self.sent: list[Envelope] = []
        self.broken = broken

    async def publish(self, topic: str, payload: bytes) -> None:
        if self.broken:
            raise ConnectionError("broker gone")
        self.sent.append(Envelope.model_validate_json(payload))

    async def subscribe(self, pattern: str) -> None:
        pass

    async def messages(self) -> AsyncIterator[tuple[str, bytes]]:
        return
        yield

    async def close(self) -> None:
        pass


def _ours(s: Scenario) -> Mapping[str, JsonValue]:
    return RunPlan(s).for_agent("writer").identity


def presence(
    conn: Captured, propagation: str = "explicit", outside: OutsideTime | None = None
) -> Presence:
    s = scenario("contamination", propagation=propagation)
    ep = Endpoint(conn, "run", "writer")
    return Presence(ep, "writer", "run", _ours(s), outside or OutsideTime())


def roll_call(propagation: str = "explicit") -> object:
    s = scenario("contamination", propagation=propagation)
    return RollCall(scenario=identity.public(s)).to_payload()


async def test_a_roll_call_for_our_experiment_is_answered_with_hello() -> None:
    conn = Captured()
    p = presence(conn)
    assert await p.on_control(roll_call()) is False
    assert [(m.recipient, m.trace_id, m.payload) for m in conn.sent] == [
        ("runner", "run-presence", {"action": "hello", "agent": "writer", "session": p.session})
    ]
    assert p.mismatch is None and p.joined


async def test_a_roll_call_for_another_experiment_is_refused() -> None:
    conn = Captured()
    p = presence(conn)
    assert await p.on_control(roll_call(propagation="implicit")) is True
    assert conn.sent == []
    assert p.mismatch is not None and "scenario differs" in p.mismatch


async def test_a_roll_call_for_the_same_file_with_other_code_is_refused(tmp_path: Path) -> None:
    """The public scenario shows no path: a python agent's code is told by its digest."""
    from errorflow.scenario.loader import load

    bundled_dir = Path(bundled()["own-agent"]).parent
    runs = {}
    for side, extra in (("runner", ""), ("same", ""), ("other", "\n# changed\n")):
        folder = tmp_path / side
        folder.mkdir()
        shutil.copy(bundled_dir / "own-agent.yaml", folder)
        (folder / "own_agent.py").write_text((bundled_dir / "own_agent.py").read_text() + extra)
        runs[side] = load(folder / "own-agent.yaml")
    call = RollCall(
        scenario=identity.public(runs["runner"]), code=identity.code_of(runs["runner"])
    ).to_payload()
    for side, refused in (("same", False), ("other", True)):
        conn = Captured()
        ours = RunPlan(runs[side]).for_agent("clerk").identity
        p = Presence(Endpoint(conn, "run", "clerk"), "clerk", "run", ours, OutsideTime())
        assert await p.on_control(call) is refused, side
        assert (p.mismatch is not None and "code of a python agent" in p.mismatch) is refused


def test_a_runs_code_digests_are_read_once(tmp_path: Path) -> None:
    """A file saved mid-run changes no later roll call: the joined agents stay."""
    from errorflow.scenario.loader import load

    bundled_dir = Path(bundled()["own-agent"]).parent
    shutil.copy(bundled_dir / "own-agent.yaml", tmp_path)
    shutil.copy(bundled_dir / "own_agent.py", tmp_path)
    plan = RunPlan(load(tmp_path / "own-agent.yaml"))
    before = dict(plan.code)
    assert before["agents.clerk"] not in ("not found", "not a file")
    (tmp_path / "own_agent.py").write_text("# saved mid-run\n")
    assert plan.code == before and identity.code_of(plan.scenario) != before


async def test_stop_is_answered_with_bye_and_ends_the_agent() -> None:
    conn = Captured()
    assert await presence(conn).on_control(Stop().to_payload()) is True
    assert [(m.recipient, m.trace_id, m.payload) for m in conn.sent] == [
        ("runner", "run-presence", {"action": "bye", "agent": "writer"})
    ]


async def test_a_bye_into_a_lost_connection_is_not_an_error() -> None:
    assert await presence(Captured(broken=True)).on_control(Stop().to_payload()) is True


async def test_other_control_messages_are_ignored() -> None:
    conn = Captured()
    p = presence(conn)
    assert await p.on_control(Ack(id="x").to_payload()) is False
    assert await p.on_control({"action": "roll_call"}) is False  # no scenario: not one
    assert await p.on_control("garbage") is False
    assert conn.sent == []


# -- liveness: the heartbeat, the will ----------------------------------------------


def test_each_process_has_its_own_session() -> None:
    assert presence(Captured()).session != presence(Captured()).session


async def test_a_joined_agent_says_alive_until_it_leaves() -> None:
    conn = Captured()
    p = presence(conn)
    beat = asyncio.create_task(p.heartbeat(interval_s=0.01))
    await asyncio.sleep(0.05)
    assert conn.sent == []  # not joined yet: nobody counts on it
    await p.on_control(roll_call())
    await asyncio.sleep(0.05)
    alive = [parse_control(m.payload) for m in conn.sent[1:]]
    assert alive and all(
        a == Alive(agent="writer", session=p.session, outside_from=process_token()) for a in alive
    )
    await p.on_control(Stop().to_payload())
    count = len(conn.sent)
    await asyncio.sleep(0.05)
    beat.cancel()
    assert len(conn.sent) == count  # after bye, silence


async def test_a_heartbeat_says_the_trials_whose_calls_are_outside_errorflow() -> None:
    """What the runner adds to those trials' timeouts (errorflow/core/outside_time.py)."""
    t = FakeTime()
    outside = OutsideTime(t.clock)
    p = presence(Captured(), outside=outside)
    assert p.alive().outside == ()
    with outside.span("run-t3"):
        t.now += 2.0
    slow = outside.span("run-t4")
    slow.__enter__()
    t.now += 0.5
    assert p.alive().outside == (
        TrialOutside(trace_id="run-t4", spent_s=0.5, waiting=True),
        TrialOutside(trace_id="run-t3", spent_s=2.0, waiting=False),
    )
    slow.__exit__(None, None, None)


def test_a_heartbeat_with_an_impossible_report_is_not_read() -> None:
    alive = Alive(
        agent="writer",
        session="s",
        outside=(TrialOutside(trace_id="t", spent_s=1.0, waiting=True),),
    )
    assert parse_control(alive.to_payload()) == alive
    entry = {"trace_id": "t", "spent_s": 1.0, "waiting": True}
    bad = [
        {"spent_s": -1.0},
        {"spent_s": float("inf")},
        {"spent_s": float("nan")},
        {"trace_id": "t" * 65},
        {"waiting": "maybe"},
    ]
    for change in bad:
        payload = {**alive.to_payload(), "outside": [{**entry, **change}]}
        assert parse_control(payload) is None, change
    many = [{**entry, "trace_id": f"t{n}"} for n in range(REPORTED_TRIALS + 1)]
    assert parse_control({**alive.to_payload(), "outside": many}) is None


async def test_a_heartbeat_into_a_lost_connection_is_not_an_error() -> None:
    p = presence(Captured(broken=True))
    p.joined = True
    beat = asyncio.create_task(p.heartbeat(interval_s=0.01))
    await asyncio.sleep(0.05)
    assert not beat.done()
    beat.cancel()


def test_the_will_is_a_signed_gone_with_a_fresh_seq_each_session() -> None:
    key = signing.new_key()
    s = scenario("contamination")
    ep = Endpoint(Captured(), "run", "writer", key=key, seq_from=0)
    p = Presence(ep, "writer", "run", _ours(s))
    (topic, first), (_, second) = p.will(), p.will()
    assert topic == "errorflow/run/control/writer"
    assert signing.verify(key, first) is None and signing.verify(key, second) is None
    a, b = Envelope.model_validate_json(first), Envelope.model_validate_json(second)
    assert parse_control(a.payload) == Gone(agent="writer", session=p.session)
    assert a.id != b.id and b.seq == a.seq + 1 and ep.seq == b.seq + 1  # seqs of its own
    assert (a.sender, a.recipient, a.kind.value) == ("writer", "runner", "control")


async def test_an_interrupted_agent_says_gone_itself_once() -> None:
    conn = Captured()
    p = presence(conn)
    await p.gone()
    assert conn.sent == []  # never joined: nobody waits for it
    await p.on_control(roll_call())
    await p.gone()
    await p.gone()
    said = [parse_control(m.payload) for m in conn.sent]
    assert said[1:] == [Gone(agent="writer", session=p.session)]


async def test_an_agent_stopped_by_the_runner_says_no_gone() -> None:
    conn = Captured()
    p = presence(conn)
    await p.on_control(roll_call())
    await p.on_control(Stop().to_payload())
    await p.gone()
    assert [m.payload["action"] for m in conn.sent] == ["hello", "bye"]
