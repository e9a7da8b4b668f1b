"""Topic layout: one namespace per run, so runs never hear each other.

errorflow/{run_id}/inbox/{agent}     task and result messages addressed to an agent
errorflow/{run_id}/inbox/runner      final results for the runner
errorflow/{run_id}/events/{sender}   telemetry events (tool calls, retries, breaker, labels)
errorflow/{run_id}/control/{sender}  presence, acknowledgements, start/stop
errorflow/{run_id}/#                 everything of a run (recorder, TUI, mosquitto_sub)
"""

from __future__ import annotations

from errorflow.protocol.envelope import Kind

ROOT = "errorflow"
RUNNER = "runner"


def run_filter(run_id: str) -> str:
    return f"{ROOT}/{run_id}/#"


def inbox(run_id: str, agent: str) -> str:
    return f"{ROOT}/{run_id}/inbox/{agent}"


def events(run_id: str, sender: str) -> str:
    return f"{ROOT}/{run_id}/events/{sender}"


def control(run_id: str, sender: str) -> str:
    return f"{ROOT}/{run_id}/control/{sender}"


def acks(run_id: str, recipient: str) -> str:
    return f"{ROOT}/{run_id}/ack/{recipient}"


def control_filter(run_id: str) -> str:
    return f"{ROOT}/{run_id}/control/+"


def for_message(run_id: str, kind: Kind, sender: str, recipient: str) -> str:
    """Where a message of this kind goes."""
    if kind is Kind.EVENT:
        return events(run_id, sender)
    if kind is Kind.CONTROL:
        return control(run_id, sender)
    return inbox(run_id, recipient)


def run_of(topic: str) -> str | None:
    """The run id a topic belongs to, or None for a topic outside our namespace."""
    parts = topic.split("/")
    if len(parts) < 3 or parts[0] != ROOT:
        return None
    return parts[1]


def matches(topic: str, pattern: str) -> bool:
    """MQTT wildcard match (`+` one level, `#` the rest)."""
    t, p = topic.split("/"), pattern.split("/")
    for i, part in enumerate(p):
        if part == "#":
            return True
        if i >= len(t) or (part != "+" and part != t[i]):
            return False
    return len(t) == len(p)
