"""The runner's own presence, for agents in processes of their own: a last will and a
heartbeat, so that an `errorflow agent` does not outlive its runner.

The agent learns that its runner went away in two ways (what it makes of them:
errorflow/runtime/runner_watch.py):

* the runner's broker session carries a last will, `gone` of the runner, signed with the
  run key when the session opens; the broker publishes it when the session ends without
  a clean disconnect (a killed runner: its socket closes at once). A clean close discards
  it, and the runner's `stop` ends the agents anyway;
* while agents in processes take part the runner says `alive` every `HEARTBEAT_S`, so
  silence means something where no will can arrive (the broker went down with the
  runner, a partition the broker notices only after its keepalive).

Both are control envelopes of the runner like any other: signed with the run key and
numbered from its endpoint's seq, so a client without the key cannot forge them, and
they name the runner's `session` (a random token per runner process), so a will of an
older runner of the same run (before a `--resume`) is told from this one's.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable

from errorflow.agents.presence import HEARTBEAT_S, SESSION_BYTES
from errorflow.bus.endpoint import Endpoint
from errorflow.bus.mqtt import MqttBus
from errorflow.bus.transport import Bus, Connection
from errorflow.protocol import topics
from errorflow.protocol.control import Alive, Gone


class RunnerPresence:
    """The runner's session token, its last will and its heartbeat."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.session = secrets.token_hex(SESSION_BYTES)
        self._beat: asyncio.Task[None] | None = None

    def will(self) -> tuple[str, bytes]:
        """The runner's last will for a new session: a `gone` to everyone."""
        return self.endpoint.will(Gone(agent=topics.RUNNER, session=self.session), "all")

    def start_heartbeat(self, interval_s: float = HEARTBEAT_S) -> None:
        self._beat = asyncio.create_task(self._heartbeat(interval_s), name="runner-heartbeat")

    async def stop_heartbeat(self) -> None:
        if self._beat is not None:
            self._beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beat
            self._beat = None

    async def _heartbeat(self, interval_s: float) -> None:
        alive = Alive(agent=topics.RUNNER, session=self.session)
        while True:
            with contextlib.suppress(ConnectionError):  # the agents hear the silence
                await self.endpoint.control(alive, trace="presence")
            await asyncio.sleep(interval_s)


async def runner_endpoint(
    bus: Bus, client_id: str, make: Callable[[Connection], Endpoint]
) -> tuple[Endpoint, RunnerPresence]:
    """The runner's endpoint (`make` builds it on a connection) and presence, on a broker
    session that carries the runner's last will from its first connect (a bus without
    wills, in-process, has no broker to publish one)."""
    if isinstance(bus, MqttBus):
        conn = bus.open(client_id)
        endpoint = make(conn)
        presence = RunnerPresence(endpoint)
        conn.will = presence.will
        await conn.start()
        return endpoint, presence
    endpoint = make(await bus.connect(client_id))
    return endpoint, RunnerPresence(endpoint)
