"""Where a result goes: on to every agent the agent `sends_to` (or to the runner); a
reviewer that finds claims wrong sends the work back to its author instead, as a task
for the next round, while rounds are left. A manager's round 0 sends each of its
delegates its sub-task (a task); a delegate's result goes back to its manager, for the
manager's round 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from errorflow.protocol import topics
from errorflow.protocol.claims import FinalAnswer
from errorflow.protocol.envelope import Kind
from errorflow.scenario.spec.model import AgentSpec

#: The round a manager works on its delegates' results in.
COLLECT_ROUND = 1


@dataclass(frozen=True)
class Route:
    kind: Kind
    targets: list[str]
    round: int  # the round the recipients work on


def route(spec: AgentSpec, final: FinalAnswer, round_: int, manager: str | None = None) -> Route:
    """Pass the work on, or send it back for revision while rounds are left; `manager`:
    the agent this one is a delegate of."""
    if spec.returns_to and final.revise and round_ < spec.max_revisions:
        return Route(Kind.TASK, [spec.returns_to], round_ + 1)
    if spec.delegates and round_ < COLLECT_ROUND:
        return Route(Kind.TASK, list(spec.delegates), round_)
    if manager is not None:
        return Route(Kind.RESULT, [manager], COLLECT_ROUND)
    return Route(Kind.RESULT, spec.sends_to or [topics.RUNNER], round_)
