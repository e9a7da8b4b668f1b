"""Where a result goes: on to every agent the agent `sends_to` (or to the runner); a
reviewer that finds claims wrong sends the work back to its author instead, as a task
for the next round, while rounds are left.
"""

from __future__ import annotations

from dataclasses import dataclass

from errorflow.protocol import topics
from errorflow.protocol.claims import FinalAnswer
from errorflow.protocol.envelope import Kind
from errorflow.scenario.spec.model import AgentSpec


@dataclass(frozen=True)
class Route:
    kind: Kind
    targets: list[str]
    round: int  # the round the recipients work on


def route(spec: AgentSpec, final: FinalAnswer, round_: int) -> Route:
    """Pass the work on, or send it back for revision while rounds are left."""
    if spec.returns_to and final.revise and round_ < spec.max_revisions:
        return Route(Kind.TASK, [spec.returns_to], round_ + 1)
    return Route(Kind.RESULT, spec.sends_to or [topics.RUNNER], round_)
