"""Why an agent's loop stopped before the model gave a final answer.

On the wire a stop reason is one string (the result payload's `stopped`, the
`loop_stop` event's `stopped`): the code, prefixed with `unrecoverable:` when the policy
stopped at once on a class no retry fixes. The type keeps the two parts apart so no
reader has to unpack the string.
"""

from __future__ import annotations

from dataclasses import dataclass

from errorflow.core.taxonomy import ErrorCode

UNRECOVERABLE_PREFIX = "unrecoverable:"
_CODES = {c.value: c for c in ErrorCode}


@dataclass(frozen=True)
class StopReason:
    #: An error code, or a stop that is not one ("crashed").
    code: ErrorCode | str
    #: The policy stopped at once on this class (`stop_on_unrecoverable`).
    unrecoverable: bool = False

    @property
    def code_value(self) -> str:
        return self.code.value if isinstance(self.code, ErrorCode) else self.code

    @property
    def wire(self) -> str:
        return (UNRECOVERABLE_PREFIX if self.unrecoverable else "") + self.code_value

    @classmethod
    def from_wire(cls, wire: str) -> StopReason:
        """The inverse of `wire`: a code that is not an `ErrorCode` stays a string."""
        unrecoverable = wire.startswith(UNRECOVERABLE_PREFIX)
        value = wire.removeprefix(UNRECOVERABLE_PREFIX) if unrecoverable else wire
        code: ErrorCode | str = _CODES.get(value, value)
        return cls(code, unrecoverable)


#: The agent itself failed (an exception in its own code), not its tools or model.
CRASHED = StopReason("crashed")
