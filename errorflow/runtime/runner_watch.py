"""An agent process's view of its runner: has it called the roll, and is it still there?

Theory of operation
-------------------
`errorflow agent` follows its runner on a broker session of its own (so the agent is
the same code as the runner's in-process agents), subscribed to the runner's control
topic, where every envelope is checked as any other: signed with the run key, of this
run, from the runner, not seen before. A forged `gone` is dropped there like any forged
envelope: a client without the key cannot make agents leave.

* Until the runner's first roll call the agent waits (`--wait-timeout`, the CLI's).
* Then every message of the runner counts as a sign of life. The runner says `alive`
  every second while agents in processes take part (errorflow/runtime/runner_presence.
  py), so `silence_s` without a word from it (`--wait-timeout`) means it is gone, and
  so does the broker being unreachable that long: the agent cannot tell them apart, and
  serves nobody either way.
* The runner's last will, a `gone` of the session the runner's heartbeat names, is
  published by the broker as soon as a killed runner's socket closes. It is a hint, as
  an agent's will is to the runner: a runner whose connection only dropped reconnects
  and speaks again within a second or two. So the agent leaves `will_wait_s` after the
  will unless the runner speaks meanwhile. A `gone` of another session (an older runner
  of the run, before a `--resume`) changes nothing, and neither does a replayed message
  older than the newest one heard (runner seqs count up across its processes).

`RunnerWatch` decides (pure: callers pass `now`); `follow_runner` feeds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from errorflow.bus.endpoint import Endpoint
from errorflow.bus.mqtt import MqttBus
from errorflow.bus.transport import Connection
from errorflow.bus.url import BrokerURL
from errorflow.core.errors import ErrorflowError
from errorflow.protocol import topics
from errorflow.protocol.control import (
    Alive,
    Control,
    End,
    Gone,
    RollCall,
    Stop,
    parse_control,
)

#: How long an agent waits for its runner to speak after the runner's last will: a
#: runner that is alive says `alive` every second.
WILL_WAIT_S = 5.0
#: How often the follower looks at the clock when nothing arrives.
TICK_S = 0.25


class RunnerGone(ErrorflowError, ConnectionError):
    """The runner of the run went away: the agent leaves (`str()` says why)."""


@dataclass
class RunnerWatch:
    """Is the runner still there? `silence_s`: how long it may say nothing (0: for
    ever); `will_wait_s`: how long after its last will."""

    silence_s: float
    will_wait_s: float = WILL_WAIT_S
    last_heard: float = 0.0
    newest_seq: int = -1  # of the runner's messages heard: an older one is a replay
    session: str | None = None  # the runner's, from its heartbeat
    will_at: float | None = None
    ended: bool = False  # it said stop or end: its silence from then on is expected

    def heard(self, control: Control | None, seq: int, now: float) -> None:
        """A valid message of the runner's, its `seq` (`control`: what it said, if a
        control). A will was signed when its session opened, so it is older than what
        the runner said since: it is told by its session, anything else by its seq."""
        if isinstance(control, Gone):
            if control.session == self.session and self.will_at is None:
                self.will_at = now
            return
        if seq <= self.newest_seq:
            return  # a replay of an older message (of this runner, or one before it)
        self.newest_seq, self.last_heard, self.will_at = seq, now, None
        self.ended = self.ended or isinstance(control, Stop | End)
        if isinstance(control, Alive):
            self.session = control.session

    def why_gone(self, now: float) -> str | None:
        """Why the runner counts as gone now (a clause), or None while it does not."""
        if self.ended:
            return None
        wait = self.will_wait_s  # the silence rule below may end it sooner
        if self.will_at is not None and now - self.will_at >= wait:
            return (
                f"the runner left without a goodbye (its last will) and said nothing for {wait:g}s"
            )
        if self.silence_s and now - self.last_heard > self.silence_s:
            return f"nothing from the runner for {self.silence_s:g}s"
        return None


async def follow_runner(
    url: BrokerURL,
    run_id: str,
    name: str,
    key: bytes,
    joins: Callable[[RollCall], bool],
    silence_s: float,
    joined: asyncio.Event,
    will_wait_s: float = WILL_WAIT_S,
) -> None:
    """Follow the runner of `run_id`: set `joined` on its first roll call that `joins`
    accepts, then raise `RunnerGone` once it has gone away (never returns)."""
    bus = MqttBus(url)
    try:
        conn = await bus.connect(f"{run_id}-{name}-follow")
        await conn.subscribe(topics.control(run_id, topics.RUNNER))
        endpoint = Endpoint(conn, run_id, f"{name}-follow", {topics.RUNNER}, key=key)
        watch = RunnerWatch(silence_s, will_wait_s)
        hearing = asyncio.create_task(_hear(conn, endpoint, watch, joins, joined))
        try:
            while True:
                await asyncio.wait({hearing}, timeout=TICK_S)
                if hearing.done():
                    hearing.result()
                    raise RunnerGone("the connection that follows the runner closed")
                why = watch.why_gone(time.monotonic()) if joined.is_set() else None
                if why is not None:
                    raise RunnerGone(why)
        finally:
            hearing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await hearing
    finally:
        await bus.close()


async def _hear(
    conn: Connection,
    endpoint: Endpoint,
    watch: RunnerWatch,
    joins: Callable[[RollCall], bool],
    joined: asyncio.Event,
) -> None:
    """What the runner says, checked, into `watch` (and `joined`)."""
    async for topic, raw in conn.messages():
        env = endpoint.check(topic, raw)
        if env is None or env.sender != topics.RUNNER:
            continue  # dropped and counted by the endpoint (a forgery, a replay)
        control = parse_control(env.payload)
        if isinstance(control, RollCall) and not joined.is_set() and joins(control):
            joined.set()
        watch.heard(control, env.seq, time.monotonic())
