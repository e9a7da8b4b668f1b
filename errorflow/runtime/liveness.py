"""Liveness: is every participant of a run still there, and how long the runner waits
for one that is not.

Theory of operation
-------------------
An agent in a process of its own (`errorflow agent`) says `alive` every second and
leaves a last will, `gone`, that the broker publishes when its session ends without a
clean disconnect (errorflow/agents/presence.py). The runner keeps one `Liveness`:

* an agent is *suspect* when its will arrives (at once: a killed process closes its
  socket) or when nothing came from it for `silence_s` (a hung or partitioned process,
  which the broker notices only after its keepalive);
* while any agent is suspect the runner calls the roll again, every second;
* a suspect agent is *back* when it says `hello` (the answer to a roll call: it runs the
  runner's scenario) or `alive` again. A `hello` from a new session is a restarted
  process, which lost what it was working on: the runner gives it those inputs again;
* an agent suspect for `grace_s` is *lost*: the runner ends the run, marks the trials in
  flight `infra_fault` with the reason (`LOST`, rerun by `--resume`) and says so in one
  line;
* an agent whose injected crash fault fired says so before its process dies (an
  `agent_crashed` event): it is suspect at once, with that as the reason, and the
  trials it held are scored as injected crashes, not lost (errorflow/runtime/crashes.py).

While the runner itself cannot reach the broker it hears nobody, so silence does not
count against anyone until it is back (`deaf`). The other way round, agent processes
watch the runner by the same means, its will and its heartbeat, and leave when it is
gone (errorflow/runtime/runner_presence.py, runner_watch.py). The broker itself, the recorder and
in-process agents are watched by the runner directly (errorflow/runtime/runner.py).

A will cannot be signed when it is published (the broker publishes it), so it is signed
when the session opens, and it is only a hint: a valid `gone` of an agent that still
works costs a roll call, which the agent answers. Replaying a real will is a duplicate;
one of an older session of the agent is ignored. Pure: no clock (callers pass `now`), no
I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from errorflow.core.errors import ErrorflowError
from errorflow.scoring.score import Outcome, TrialScore

#: How long the runner waits for a participant that went away (`--grace-s`).
DEFAULT_GRACE_S = 15.0
#: Nothing from an agent in a process for this long (six heartbeats): suspect.
SILENCE_S = 6.0
#: An agent process replaced by a newer one, heard from this long after, still runs.
STILL_RUNNING_S = 1.5
#: The reason of a trial a lost participant took with it starts so; `--resume` reruns it.
LOST = "lost: "


@dataclass(frozen=True)
class Lost:
    """A participant gone for good: `who` it is, `what` happened (a clause)."""

    who: str
    what: str

    @property
    def reason(self) -> str:
        """The reason stored with each trial it took with it."""
        return f"{LOST}{self.what}"


class ParticipantLost(ErrorflowError, ConnectionError):
    """The run ended because a participant (an agent, the recorder, the broker) went away
    and did not come back; the run is left interrupted, to be resumed."""

    def __init__(
        self, lost: Lost, run_id: str, in_flight: int, not_run: int, crashed: int = 0
    ) -> None:
        self.lost, self.run_id = lost, run_id
        took = f"{crashed} trials it held scored as injected crashes, " if crashed else ""
        super().__init__(
            f"{lost.what}; run {run_id} stopped: {took}{in_flight} trials in flight marked "
            f"infra_fault, {not_run} not run"
        )


def taken_by_lost(score: TrialScore) -> bool:
    """A trial that measured nothing because a participant was lost (`--resume` reruns it)."""
    return score.outcome is Outcome.INFRA_FAULT and score.reason.startswith(LOST)


@dataclass
class _Peer:
    session: str
    last_seen: float
    suspect_since: float | None = None
    why: str = ""
    #: Its session said it dies (an injected crash): only a new session is back.
    dead: bool = False
    #: Process tokens a newer one replaced, and when: one still speaking a while after
    #: is a second process (a heartbeat sent before it died may arrive just after).
    replaced: dict[str, float] = field(default_factory=dict)


@dataclass
class Liveness:
    """The agents that joined, by name. `heartbeats`: silence counts (agents in processes
    say `alive`; in-process ones are watched as tasks instead)."""

    grace_s: float
    silence_s: float = SILENCE_S
    heartbeats: bool = True
    _peers: dict[str, _Peer] = field(default_factory=dict)
    _deaf_until: float = float("-inf")
    #: An agent two processes answer as (each would do its trials' work).
    _twice: Lost | None = None

    def join(self, agent: str, session: str, now: float) -> bool:
        """A `hello`; True when it comes from a new session of an agent that had joined
        (a restarted process: it lost the work it held)."""
        peer = self._peers.get(agent)
        if peer is None:
            self._peers[agent] = _Peer(session, now)
            return False
        restarted = session != peer.session
        if peer.dead and not restarted:  # a late word of the dead process
            return False
        if restarted:
            peer.replaced[peer.session] = now
        peer.session, peer.last_seen, peer.suspect_since = session, now, None
        peer.dead = False
        return restarted

    def alive(self, agent: str, session: str, now: float) -> None:
        peer = self._peers.get(agent)
        since = peer.replaced.get(session) if peer is not None else None
        if since is not None and now - since > STILL_RUNNING_S and self._twice is None:
            self._twice = Lost(
                f"agent {agent}",
                f"two processes answer as agent {agent} (one joined while the other still "
                "ran): each does the work of the trials it is sent, which the run would "
                "count once; run one `errorflow agent` process per agent",
            )
        if peer is not None and session == peer.session and not peer.dead:
            peer.last_seen, peer.suspect_since = now, None

    def seen(self, agent: str, now: float) -> None:
        """Any other message of the agent: it is not silent (suspicion stays)."""
        peer = self._peers.get(agent)
        if peer is not None:
            peer.last_seen = max(peer.last_seen, now)

    def gone(self, agent: str, session: str, now: float) -> bool:
        """A last will; True when it makes the agent suspect."""
        peer = self._peers.get(agent)
        if peer is None or session != peer.session or peer.suspect_since is not None:
            return False
        peer.suspect_since, peer.why = now, "it left without a goodbye: its last will"
        return True

    def crashed(self, agent: str, what: str, now: float) -> None:
        """The agent said it dies (an injected crash): suspect at once, and `what` is why
        (a clause: `agent writer crashed ...`). Only a replacement brings it back."""
        peer = self._peers.get(agent)
        if peer is None:
            return
        if peer.suspect_since is None:
            peer.suspect_since = now
        peer.why, peer.dead = what, True

    def deaf(self, now: float) -> None:
        """The runner could not hear anyone until `now` (its own broker connection was
        down): silence up to then counts against nobody."""
        self._deaf_until = now

    @property
    def suspects(self) -> list[str]:
        return sorted(n for n, p in self._peers.items() if p.suspect_since is not None)

    def check(self, now: float) -> tuple[list[str], Lost | None]:
        """(agents that became suspect now, the first agent lost: suspect for `grace_s`,
        or answered for by two processes)."""
        newly: list[str] = []
        if self._twice is not None:
            return newly, self._twice
        for name, peer in sorted(self._peers.items()):
            heard = max(peer.last_seen, self._deaf_until)
            if peer.suspect_since is None and self.heartbeats and now - heard > self.silence_s:
                peer.suspect_since, peer.why = now, f"nothing from it for {self.silence_s:g}s"
                newly.append(name)
        for name, peer in sorted(self._peers.items()):
            if peer.suspect_since is None:
                continue
            if now - max(peer.suspect_since, self._deaf_until) > self.grace_s:
                return newly, Lost(
                    f"agent {name}",
                    f"agent {name} is gone ({peer.why}) and did not come back within the "
                    f"{self.grace_s:g}s grace period",
                )
        return newly, None

    def why(self, agent: str) -> str:
        peer = self._peers.get(agent)
        return peer.why if peer is not None else ""
