"""The runner's task message: its payload, written and read.

The prompt goes out redacted (the runner redacts it); reading is defensive like every
payload reader: a prompt that is not a string reads as its text, needs that are not a
list read as none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import JsonValue

from errorflow.protocol.envelope import JsonObject


@dataclass(frozen=True)
class TaskPayload:
    prompt: str
    #: The ids of the needs the task asks for, in the scenario's order.
    needs: tuple[str, ...]

    def to_wire(self) -> JsonObject:
        needs: list[JsonValue] = list(self.needs)
        return {"prompt": self.prompt, "needs": needs}

    @classmethod
    def from_wire(cls, payload: Mapping[str, object]) -> TaskPayload:
        needs = payload.get("needs")
        return cls(
            prompt=str(payload.get("prompt", "")),
            needs=tuple(str(n) for n in needs) if isinstance(needs, list) else (),
        )
