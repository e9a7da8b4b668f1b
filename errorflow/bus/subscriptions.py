"""The topic filters one broker session subscribed to, and which topics they match.

Both MQTT adapters drop messages on topics they did not ask for (amqtt may deliver
retained messages for filters a client never named). A run has a few topics per agent,
so whether a topic matches is worked out once and remembered until the filters change.
"""

from __future__ import annotations

from collections.abc import Iterator

from errorflow.protocol.topics import matches

#: Topics whose match is remembered at once; past it the memory starts again.
MATCHED_LIMIT = 4096


class Subscriptions:
    def __init__(self) -> None:
        self.patterns: list[str] = []
        self._matched: dict[str, bool] = {}

    def add(self, pattern: str) -> None:
        self.patterns.append(pattern)
        self._matched.clear()

    def __iter__(self) -> Iterator[str]:
        return iter(self.patterns)

    def wanted(self, topic: str) -> bool:
        """Whether `topic` matches one of the filters."""
        known = self._matched.get(topic)
        if known is None:
            if len(self._matched) >= MATCHED_LIMIT:
                self._matched.clear()
            known = self._matched[topic] = any(matches(topic, p) for p in self.patterns)
        return known
