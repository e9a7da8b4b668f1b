"""The small shapes every block of a scenario is built from: a strict block, a block
that gained fields after scenarios were first stored, a name, a probability."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from errorflow.core.redact import redact


def _not_a_secret(name: str) -> str:
    """A name travels as it is (topics, senders, claim keys): one that redaction would
    change (a token's shape) could not, so it is refused here."""
    if redact(name) != name:
        raise ValueError(
            "a name shaped like a secret (an API key or token) would be redacted on the bus "
            "and in the store, and what it names lost; choose another name"
        )
    return name


Ident = Annotated[
    str,
    Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$"),
    AfterValidator(_not_a_secret),
]
Probability = Annotated[float, Field(ge=0.0, le=1.0)]
#: Longest run time a scenario may describe (seconds): about 11.6 days.
MAX_RUN_S = 1_000_000.0


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Extended(Strict):
    """A block that gained fields after scenarios were first stored: those fields are
    left out of its dump while they hold their defaults, so an older file dumps (and
    hashes: errorflow.scenario.spec.identity) exactly as it did, and stored runs resume."""

    added_fields: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _without_unused_additions(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            fields = type(self).model_fields
            for name in self.added_fields:
                if name in data and getattr(self, name) == fields[name].get_default(
                    call_default_factory=True
                ):
                    del data[name]
        return data
