"""The rows of the store's tables as they are written (one place for each table's column
order); `batch_insert` writes them."""

from __future__ import annotations

import json
from typing import NamedTuple, Self

from errorflow.bus.redaction import holds_secret, ids_hold_secret
from errorflow.core.redact import redact, redact_json
from errorflow.protocol.envelope import Envelope
from errorflow.protocol.events import event_type
from errorflow.scoring.score import MessageLabel, TrialScore

# -- rows: the one place a table's column order is written down ------------------------
#
# NamedTuples: named fields for readers, a tuple for sqlite3 (`insert_rows` binds their
# values). Built with `tuple.__new__`: the recorder makes one per envelope, and the
# generated keyword constructor costs 5 % of its handling time. Their text is redacted
# as they are built, whoever sent it: a secret a sender let through is not stored.

_new_row = tuple.__new__


def _stored(env: Envelope, text: str, clean: bool = False) -> str:
    """`text` as the store may keep it; `clean`: its sender's net already searched its
    errors and payload (a `Posted` envelope), so only the ids are left to search."""
    suspect = ids_hold_secret(env) if clean else holds_secret(env, text, ids=True)
    return redact_json(text) if suspect else text


class MessageRow(NamedTuple):
    run_id: str
    id: str
    trial: int
    seq: int
    sender: str
    recipient: str
    kind: str
    status: str
    confidence: float
    topic: str
    envelope: str  # the whole envelope as JSON
    received: float

    @classmethod
    def from_envelope(
        cls,
        env: Envelope,
        topic: str,
        received: float,
        text: str | None = None,
        clean: bool = False,
    ) -> Self:
        """`text`: the envelope's JSON as it came off the wire, if at hand (the recorder
        has it; encoding it again would cost the recorder's hot path); `clean`: see
        `_stored`."""
        return _new_row(
            cls,
            (
                env.run_id,
                env.id,
                env.trial,
                env.seq,
                env.sender,
                env.recipient,
                env.kind.value,
                env.status.value,
                env.confidence,
                topic,
                _stored(env, env.encode().decode() if text is None else text, clean),
                received,
            ),
        )


class EventRow(NamedTuple):
    run_id: str
    id: str
    trial: int
    seq: int
    sender: str
    type: str  # the event's kind, as on the wire (unknown kinds are stored too)
    envelope: str
    received: float

    @classmethod
    def from_envelope(
        cls, env: Envelope, received: float, text: str | None = None, clean: bool = False
    ) -> Self:
        return _new_row(
            cls,
            (
                env.run_id,
                env.id,
                env.trial,
                env.seq,
                env.sender,
                event_type(env.payload),
                _stored(env, env.encode().decode() if text is None else text, clean),
                received,
            ),
        )


class RejectRow(NamedTuple):
    run_id: str
    topic: str
    reason: str
    detail: str
    raw: bytes
    received: float


class LabelRow(NamedTuple):
    run_id: str
    trial: int
    message_id: str
    sender: str
    label: str
    reason: str

    @classmethod
    def from_label(cls, run_id: str, trial: int, label: MessageLabel) -> Self:
        return cls(
            run_id, trial, label.message_id, label.sender, label.label.value, redact(label.reason)
        )


class TrialRow(NamedTuple):
    run_id: str
    trial: int
    outcome: str
    depth: int
    reason: str
    costs_json: str
    #: Partial credit and whether a fault struck the trial (errorflow.scoring.credit),
    #: so a resumed run's summary counts the trials scored before it too.
    credit_json: str = "{}"

    @classmethod
    def from_score(cls, run_id: str, score: TrialScore) -> Self:
        return cls(
            run_id,
            score.trial,
            score.outcome.value,
            score.depth,
            redact(score.reason),
            redact_json(json.dumps(score.costs.to_wire())),
            json.dumps({"credit": score.credit, "struck": score.struck}),
        )
