"""Inputs that never came: a dropped or hung message, or one slower than the wait.

An injected `drop` / `hang` (errorflow.faults.agent) reaches the
recipient as a marker instead of the message, so that its wait ends at once in real
time; the recipient treats it exactly as a wait of `wait_s` simulated seconds that
timed out, and goes on without it. A `slow` message arrives `delay_s` later; past the
recipient's `wait_s` it is too late and counts as no reply. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from errorflow.core.taxonomy import ErrorCode
from errorflow.policies.classify import Failure
from errorflow.protocol.envelope import Envelope
from errorflow.protocol.result import lateness


@dataclass(frozen=True)
class Arrivals:
    arrived: list[Envelope]
    missing: list[Failure]
    #: Simulated seconds the recipient waited past its start (the latest arrival).
    waited_s: float


def arrivals(inputs: Sequence[Envelope], wait_s: float) -> Arrivals:
    arrived: list[Envelope] = []
    missing: list[Failure] = []
    waited = 0.0
    for env in inputs:
        withheld, delay = lateness(env.payload)
        if withheld or delay > wait_s:
            missing.append(
                Failure(
                    ErrorCode.TIMEOUT,
                    env.sender,
                    f"no reply from {env.sender} within {wait_s:g} s; went on without it",
                )
            )
            waited = max(waited, wait_s)
        else:
            arrived.append(env)
            waited = max(waited, delay)
    return Arrivals(arrived, missing, waited)
