"""When a lost broker connection is tried again: one policy for both MQTT adapters
(errorflow.bus.mqtt on aiomqtt, errorflow.bus.gmqtt_transport on gmqtt)."""

from __future__ import annotations

import asyncio
import logging

RECONNECT_BASE_S = 0.2
RECONNECT_CAP_S = 5.0


class Backoff:
    """The wait before the next connection attempt: RECONNECT_BASE_S, doubling up to
    RECONNECT_CAP_S while attempts fail, the base again once connected."""

    def __init__(self, client_id: str, log: logging.Logger) -> None:
        self.client_id = client_id
        self.log = log
        self.delay = RECONNECT_BASE_S

    def connected(self) -> None:
        self.delay = RECONNECT_BASE_S

    async def wait(self, exc: BaseException) -> None:
        """Say why (once per outage; each further attempt only in the debug log), wait,
        and double the next wait."""
        level = logging.WARNING if self.delay == RECONNECT_BASE_S else logging.DEBUG
        self.log.log(
            level,
            "%s: broker connection lost (%s); reconnecting in %.1fs",
            self.client_id,
            exc,
            self.delay,
        )
        await asyncio.sleep(self.delay)
        self.delay = min(RECONNECT_CAP_S, self.delay * 2)
