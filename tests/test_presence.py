"""Presence: hello only on a roll call for our experiment, bye on stop."""

from __future__ import annotations

from collections.abc import AsyncIterator

from errorflow.agents.presence import Presence
from errorflow.bus.endpoint import Endpoint
from errorflow.bus.envelope import Envelope
from errorflow.core.control import Ack, RollCall, Stop
from errorflow.scenario import identity
from tests.conftest import scenario


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


def presence(conn: Captured, propagation: str = "explicit") -> Presence:
    s = scenario("contamination", propagation=propagation)
    return Presence(Endpoint(conn, "run", "writer"), "writer", "run", s)


def roll_call(propagation: str = "explicit") -> object:
    s = scenario("contamination", propagation=propagation)
    return RollCall(scenario=identity.public(s)).to_payload()


async def test_a_roll_call_for_our_experiment_is_answered_with_hello() -> None:
    conn = Captured()
    p = presence(conn)
    assert await p.on_control(roll_call()) is False
    assert [(m.recipient, m.trace_id, m.payload) for m in conn.sent] == [
        ("runner", "run-presence", {"action": "hello", "agent": "writer"})
    ]
    assert p.mismatch is None


async def test_a_roll_call_for_another_experiment_is_refused() -> None:
    conn = Captured()
    p = presence(conn)
    assert await p.on_control(roll_call(propagation="implicit")) is True
    assert conn.sent == []
    assert p.mismatch is not None and "scenario differs" in p.mismatch


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
