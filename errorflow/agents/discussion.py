"""An agent's place in a discussion (errorflow.scenario.spec.discussion_model): where each
round's answer goes, and what it remembers between rounds.

Round 0's answer and each later round's go to the peers that work on the next round:
all peers before the last round, the deciding peers for the last one. A deciding
member's last answer goes on like any result (route); a member that does not decide
stops after the round before the last. Pure bookkeeping; the agent does the work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import JsonValue

from errorflow.faults.agent import Fired
from errorflow.models.backend import TaskTurn
from errorflow.protocol.claims import FinalAnswer
from errorflow.protocol.envelope import Envelope, WireError
from errorflow.protocol.result import ResultPayload
from errorflow.scenario.agent_plan import AgentPlan


@dataclass(frozen=True)
class Discussion:
    peers: tuple[str, ...] = ()
    rounds: int = 0
    decides: bool = True
    deciding_peers: tuple[str, ...] = ()

    @classmethod
    def of(cls, plan: AgentPlan) -> Discussion:
        if not plan.peers:
            return cls()
        return cls(plan.peers, plan.rounds, plan.decides, plan.deciding_peers)

    @property
    def member(self) -> bool:
        return bool(self.peers)

    @property
    def last_round(self) -> int:
        return self.rounds if self.decides else self.rounds - 1

    def peers_after(self, round_: int) -> list[str] | None:
        """The peers that get this round's answer (None: it goes on as a result)."""
        if not self.member or round_ >= self.rounds:
            return None
        return list(self.peers if round_ + 1 < self.rounds else self.deciding_peers)


@dataclass
class Memory:
    """What a member keeps of a trial between rounds."""

    task: TaskTurn
    #: Round 0's inputs: what later rounds still report (explicit propagation).
    inputs: list[Envelope]
    answer: FinalAnswer
    #: What its own tools said, by claim key (round 0's answer, before any discussion).
    own_evidence: dict[str, JsonValue]
    #: The id of the member's last answer as sent (None: it went to nobody).
    last_id: str | None = None
    #: What its last answer reported (errors, confidence): a failure that reached a
    #: member stays reported in its later rounds, as a chain forwards it downstream.
    reported: list[WireError] = field(default_factory=list)
    confidence: float = 1.0
    #: A round whose answer went to nobody (a deciding member's round before the last
    #: when no peer of it decides): what it spent and what fired, for the next round's
    #: result to carry.
    unsent: Unsent | None = None


@dataclass(frozen=True)
class Unsent:
    payload: ResultPayload
    fired: Sequence[Fired]


@dataclass(frozen=True)
class Heard:
    """What a discussion round's inputs say about failures, once each: every error by
    (origin, tool, code) at its fewest hops, the lowest confidence. Without it a
    complete graph would multiply the same error round after round."""

    errors: list[WireError]
    confidence: float

    @classmethod
    def of(cls, memory: Memory | None, inputs: Sequence[Envelope]) -> Heard:
        seen: dict[tuple[str, str | None, str], WireError] = {}
        reports = [*(memory.reported if memory else []), *(e for m in inputs for e in m.errors)]
        for e in reports:
            key = (e.origin, e.tool, e.code.value)
            if key not in seen or e.hops < seen[key].hops:
                seen[key] = e
        levels = [memory.confidence if memory else 1.0, *(m.confidence for m in inputs)]
        return cls(list(seen.values()), min(levels))
