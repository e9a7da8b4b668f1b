"""The embedded broker: amqtt on 127.0.0.1 and a free port, for zero-setup runs.

amqtt speaks MQTT 3.1.1 only and gives anonymous sessions no offline queue, so every
participant subscribes before the runner publishes anything (the presence handshake
in the runner guarantees it). Its own logging is loud; we keep it at WARNING.
"""

from __future__ import annotations

import logging
from typing import Any

from amqtt.broker import Broker

from errorflow.bus.url import BrokerURL

for _name in ("amqtt", "transitions"):
    logging.getLogger(_name).setLevel(logging.ERROR)


class EmbeddedBroker:
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self._port = port
        self._broker: Any = None
        self.port = 0

    async def start(self) -> BrokerURL:
        config = {
            "listeners": {"default": {"type": "tcp", "bind": f"{self.host}:{self._port}"}},
            "plugins": {
                "amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True},
            },
        }
        self._broker = Broker(config)
        await self._broker.start()
        server = self._broker._servers["default"].instance  # amqtt keeps no public accessor
        self.port = server.sockets[0].getsockname()[1]
        return BrokerURL(self.host, self.port)

    async def stop(self) -> None:
        if self._broker is not None:
            await self._broker.shutdown()
            self._broker = None

    async def __aenter__(self) -> BrokerURL:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
