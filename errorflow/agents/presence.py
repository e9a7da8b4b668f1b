"""An agent's presence in a run: `hello` on the runner's roll call, `bye` on its stop.

A hello is sent only in answer to a roll call, which carries the runner's scenario, so
an agent never counts as present for an experiment it does not run: a joining agent
whose scenario differs (file, --set, --seed or --propagation) refuses to join.
"""

from __future__ import annotations

import contextlib
import logging

from errorflow.bus import topics
from errorflow.bus.endpoint import Endpoint
from errorflow.core.control import Bye, Hello, RollCall, Stop, parse_control
from errorflow.scenario import identity
from errorflow.scenario.model import Scenario

log = logging.getLogger(__name__)


class Presence:
    def __init__(self, endpoint: Endpoint, name: str, run_id: str, scenario: Scenario) -> None:
        self.endpoint, self.name, self.run_id = endpoint, name, run_id
        self._ours = identity.agent_view(identity.public(scenario))
        #: Why this agent refused to join the run (None while it takes part).
        self.mismatch: str | None = None

    async def on_control(self, payload: object) -> bool:
        """Answer one control message of the runner's; True when the agent must leave."""
        control = parse_control(payload)
        if isinstance(control, RollCall):
            if identity.agent_view(control.scenario) != self._ours:
                self.mismatch = (
                    f"agent {self.name}: the runner's scenario differs from ours "
                    f"(file, --set, --seed or --propagation); not joining run {self.run_id}"
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
            Hello(agent=self.name), recipient=topics.RUNNER, trace="presence"
        )

    async def bye(self) -> None:
        """Our last message of the run: the recorder knows nothing of ours follows."""
        with contextlib.suppress(ConnectionError):
            await self.endpoint.control(
                Bye(agent=self.name), recipient=topics.RUNNER, trace="presence"
            )
