"""An agent's presence in a run: `hello` on the runner's roll call, `bye` on its stop, and
its liveness while it takes part (a heartbeat and a last will), and the trials its calls
keep outside errorflow (in the heartbeat).

A hello is sent only in answer to a roll call, which carries the runner's scenario, so
an agent never counts as present for an experiment it does not run: a joining agent
whose scenario differs (file, --set, --seed or --propagation) refuses to join.

Liveness, for an agent in a process of its own (errorflow/runtime/liveness.py says what
the runner makes of it): every message names `session`, a random token per process, so
a restarted agent is told from one that reconnected. Once joined, the agent says `alive`
every `HEARTBEAT_S`. Its last will, `gone`, is built by `will()` at every connect: signed
with the run key then and published by the broker when the session ends without a clean
disconnect (a killed process, a dropped network). A clean close discards a will, so an
agent that is interrupted says `gone()` itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Mapping

from pydantic import JsonValue

from errorflow.bus.endpoint import Endpoint
from errorflow.core.outside_time import OUTSIDE, OutsideTime, process_token
from errorflow.protocol import topics
from errorflow.protocol.control import (
    Alive,
    Bye,
    Gone,
    Hello,
    RollCall,
    Stop,
    TrialOutside,
    parse_control,
)
from errorflow.scenario.spec import identity

log = logging.getLogger(__name__)

#: How often a joined agent says `alive` (the runner suspects it after a few missed).
HEARTBEAT_S = 1.0
SESSION_BYTES = 8


class Presence:
    def __init__(
        self,
        endpoint: Endpoint,
        name: str,
        run_id: str,
        ours: Mapping[str, JsonValue],
        outside: OutsideTime = OUTSIDE,
    ) -> None:
        """`ours`: the agent-facing part of our public scenario (AgentPlan.identity);
        `outside`: where our calls outside errorflow are timed (the process's)."""
        self.endpoint, self.name, self.run_id = endpoint, name, run_id
        self._outside = outside
        self._ours = ours
        #: Why this agent refused to join the run (None while it takes part).
        self.mismatch: str | None = None
        self.session = secrets.token_hex(SESSION_BYTES)
        self.joined = False  # said hello: the runner counts on our heartbeat
        self.left = False  # said bye: nothing of ours follows

    async def on_control(self, payload: object) -> bool:
        """Answer one control message of the runner's; True when the agent must leave."""
        control = parse_control(payload)
        if isinstance(control, RollCall):
            if identity.agent_view(control.scenario, control.code) != self._ours:
                self.mismatch = (
                    f"agent {self.name}: the runner's scenario differs from ours (file, "
                    "--set, --seed, --propagation, or the code of a python agent or tool); "
                    f"not joining run {self.run_id}"
                )
                log.error("%s", self.mismatch)
                return True
            await self.hello()
        elif isinstance(control, Stop):
            await self.bye()
            return True
        return False

    async def hello(self) -> None:
        await self.endpoint.control(
            Hello(agent=self.name, session=self.session), recipient=topics.RUNNER, trace="presence"
        )
        self.joined = True

    async def bye(self) -> None:
        """Our last message of the run: the recorder knows nothing of ours follows."""
        self.left = True
        with contextlib.suppress(ConnectionError):
            await self.endpoint.control(
                Bye(agent=self.name), recipient=topics.RUNNER, trace="presence"
            )

    def will(self) -> tuple[str, bytes]:
        """Our last will for a new session: a `gone` to the runner."""
        return self.endpoint.will(Gone(agent=self.name, session=self.session), topics.RUNNER)

    async def heartbeat(self, interval_s: float = HEARTBEAT_S) -> None:
        """Say `alive` every `interval_s` while we take part, with the trials whose calls
        were outside errorflow lately (the runner does not count that time against their
        trial timeout: errorflow/core/outside_time.py); runs until cancelled."""
        while True:
            await asyncio.sleep(interval_s)
            if self.joined and not self.left:
                with contextlib.suppress(ConnectionError):  # the runner hears the silence
                    await self.endpoint.control(
                        self.alive(), recipient=topics.RUNNER, trace="presence"
                    )

    def alive(self) -> Alive:
        outside = tuple(
            TrialOutside(trace_id=trace_id, spent_s=spent_s, waiting=waiting)
            for trace_id, spent_s, waiting in self._outside.report()
        )
        return Alive(
            agent=self.name, session=self.session, outside=outside, outside_from=process_token()
        )

    async def gone(self) -> None:
        """Leaving without a stop (interrupted): say what our will would have said."""
        if not self.joined or self.left:
            return
        self.left = True
        topic, raw = self.will()
        with contextlib.suppress(ConnectionError):
            await self.endpoint.conn.publish(topic, raw)
