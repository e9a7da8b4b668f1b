"""Reading an event payload without its model: the fields every report shows, for a
kind it knows or not; and telling an ack from other control traffic."""

from __future__ import annotations

from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol.control import Ack, Hello, ack_payload, acked_id, is_ack, parse_control
from errorflow.protocol.events import EventFacts, RetryScheduled, event_type


def test_the_facts_of_a_known_event_are_its_fields_as_sent() -> None:
    wire = RetryScheduled(
        agent="a", tool="kpi", attempt=1, code=ErrorCode.TRANSIENT, delay_s=0.5, at=2.0
    ).to_payload()
    facts = EventFacts.from_wire(wire)
    assert (facts.type, facts.tool, facts.code) == ("retry", "kpi", "transient")
    assert (facts.at, facts.delay_s) == (2.0, 0.5)
    assert "agent" not in facts.fields and "type" not in facts.fields
    assert facts.fields["attempt"] == 1


def test_an_unknown_or_malformed_event_reads_what_it_can() -> None:
    facts = EventFacts.from_wire({"type": "novel", "tool": 3, "at": True, "code": 7})
    assert (facts.type, facts.tool, facts.code, facts.at) == ("novel", None, "7", None)
    assert event_type({}) == ""


def test_an_ack_is_told_without_parsing() -> None:
    assert is_ack(Ack(id="m1").to_payload())
    assert not is_ack(Hello(agent="a").to_payload())
    assert not is_ack({})


def test_an_ack_is_built_and_read_as_its_model_builds_and_reads_it() -> None:
    assert ack_payload("m1") == Ack(id="m1").to_payload()
    payloads: list[dict[str, object]] = [
        Ack(id="m1").to_payload(),
        {"action": "ack"},
        {"action": "ack", "id": 5},
        {"action": "ack", "id": "m1", "extra": 1},
        {"action": "hello", "id": "m1"},
        Hello(agent="a").to_payload(),
        {},
    ]
    for payload in payloads:
        parsed = parse_control(payload)
        assert acked_id(payload) == (parsed.id if isinstance(parsed, Ack) else None)
