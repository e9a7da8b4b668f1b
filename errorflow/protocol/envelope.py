"""The message envelope: the one wire format every agent, runner and observer speaks.

JSON over MQTT 3.1.1 at QoS 1. The model is strict on purpose: unknown fields, a wrong
schema version, or a payload over the size limit are rejected at the edge (see
`decode`) so that a bad message is counted and stored, never half-understood. `decode`
cannot fail open: whatever the bytes (nesting 100,000 deep, a million elements, invalid
UTF-8), it returns an envelope or raises `RejectedMessage` with a reason, nothing else.
Participants sign what they send (`errorflow.protocol.signing`): the signature is the last
member, `sig`.
`errorflow schema` prints `Envelope.model_json_schema()` for agents in other languages.
"""

from __future__ import annotations

import itertools
import os
import re
import time
from enum import StrEnum
from typing import Annotated, Any, Literal

import msgspec
import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from errorflow.core.errors import ErrorflowError
from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol import signing

SCHEMA_VERSION = 1
#: Largest encoded envelope accepted from the bus (bytes). Documented in the README.
MAX_MESSAGE_BYTES = 256 * 1024
#: Deepest nesting and most values a payload may hold: a receiver walks payloads
#: recursively, and the JSON parser itself stops at 200 levels.
MAX_PAYLOAD_DEPTH = 32
MAX_PAYLOAD_VALUES = 20_000
#: Largest seq (and what SQLite's INTEGER and a receiver's seen runs hold).
MAX_SEQ = 2**63 - 1
#: Longest trace id (a trial's conversation: the runner's run id and trial number).
MAX_TRACE_ID_CHARS = 64

#: A JSON object as a sender builds it (an envelope's payload, a JSON schema).
JsonObject = dict[str, JsonValue]

Name = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]


class _IdSource:
    """Where this process's ids come from: 32 random bits drawn once per process (again
    in a forked child), then a counter. `os.urandom` on every id was a system call per
    envelope that also let the store's thread take the GIL between messages."""

    def __init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        self.tag = os.urandom(4).hex()  # not a simulation choice: no seed
        self.count = itertools.count()


_ids = _IdSource()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_ids.restart)  # a child must not repeat the parent


def new_id() -> str:
    """Time-ordered and unique: nanoseconds, then this process's random tag and a
    counter (32 hex digits, one format for every id). Ids that sort by creation keep
    SQLite's primary-key inserts at the end of the index, which keeps the recorder fast;
    the tag keeps the ids of processes that make them at the same nanosecond apart."""
    return f"{time.time_ns():016x}{_ids.tag}{next(_ids.count) & 0xFFFFFFFF:08x}"


class Kind(StrEnum):
    TASK = "task"
    RESULT = "result"
    EVENT = "event"
    CONTROL = "control"


class Status(StrEnum):
    OK = "ok"
    PARTIAL_FAILURE = "partial_failure"
    FAILED = "failed"


class WireError(BaseModel):
    """A structured error as it travels between agents (never a raw exception)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code: ErrorCode
    tool: str | None = None
    message: str = Field(default="", max_length=2000)
    retryable: bool = False
    retry_after_s: float | None = Field(default=None, ge=0)
    suggestion: str | None = Field(default=None, max_length=2000)
    origin: str = Field(description="The agent where the failure happened.")
    hops: int = Field(default=0, ge=0, description="Agent-to-agent hops travelled so far.")


class Envelope(BaseModel):
    """One message on the bus."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: Literal[1] = 1
    id: str = Field(default_factory=lambda: new_id(), min_length=1, max_length=64)
    run_id: Name
    trial: int = Field(ge=0)
    seq: int = Field(
        ge=0,
        le=MAX_SEQ,
        description="Per-sender sequence number: detects loss and duplicates.",
    )
    sender: Name
    recipient: Name
    kind: Kind
    trace_id: str = Field(min_length=1, max_length=MAX_TRACE_ID_CHARS)
    derived_from: list[str] = Field(default_factory=list, max_length=256)
    status: Status = Status.OK
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    errors: list[WireError] = Field(default_factory=list, max_length=256)
    # Any, not JsonValue: the typed views are per kind (core/events, core/control), and
    # the wire is JSON anyway; JsonValue would make every reader cast.
    payload: dict[str, Any] = Field(default_factory=dict)
    ts: float = Field(default=0.0, description="Sender wall clock (informational only).")
    sig: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="HMAC-SHA256 (hex) of the envelope's bytes before this member, "
        "under the run's key; always the last member on the wire.",
    )

    @classmethod
    def built(
        cls,
        *,
        run_id: str,
        trial: int,
        seq: int,
        sender: str,
        recipient: str,
        kind: Kind,
        trace_id: str,
        derived_from: list[str],
        status: Status,
        confidence: float,
        errors: list[WireError],
        payload: dict[str, Any],
        ts: float,
    ) -> Envelope:
        """A sender's own envelope: what `Envelope(...)` builds of these values, without
        running its validators (a quarter of the time) when every value already is what
        they would make of it, of the exact type, within the bounds; else `Envelope(...)`
        itself, which converts or raises as it does. A receiver in another process still
        decodes and validates it."""
        if not (
            type(trial) is int
            and type(seq) is int
            and type(kind) is Kind
            and type(status) is Status
            and type(confidence) is float
            and type(ts) is float
            and type(payload) is dict
            and type(trace_id) is str
            and type(derived_from) is list
            and type(errors) is list
            and trial >= 0
            and 0 <= seq <= MAX_SEQ
            and 0.0 <= confidence <= 1.0
            and 0 < len(trace_id) <= MAX_TRACE_ID_CHARS
            and trace_id.isascii()  # else validation looks for what cannot be encoded
            and len(derived_from) <= 256
            and len(errors) <= 256
            and _valid_names(run_id, sender, recipient)
            and (not derived_from or all(type(d) is str and d.isascii() for d in derived_from))
            and (not errors or all(type(e) is WireError for e in errors))
            and all(type(k) is str for k in payload)
        ):
            return cls(
                run_id=run_id, trial=trial, seq=seq, sender=sender, recipient=recipient,
                kind=kind, trace_id=trace_id, derived_from=derived_from, status=status,
                confidence=confidence, errors=errors, payload=payload, ts=ts,
            )  # fmt: skip
        env = object.__new__(cls)
        members = {
            "v": 1,
            "id": new_id(),
            "run_id": run_id,
            "trial": trial,
            "seq": seq,
            "sender": sender,
            "recipient": recipient,
            "kind": kind,
            "trace_id": trace_id,
            "derived_from": list(derived_from),  # copies, as validation makes them
            "status": status,
            "confidence": confidence,
            "errors": list(errors),
            "payload": dict(payload),
            "ts": ts,
            "sig": None,
        }
        _set = object.__setattr__  # a frozen model: as pydantic's own construct sets them
        _set(env, "__dict__", members)
        _set(env, "__pydantic_fields_set__", set(_BUILT_FIELDS))
        _set(env, "__pydantic_extra__", None)
        _set(env, "__pydantic_private__", None)
        return env

    def encode(self, key: bytes | None = None) -> bytes:
        """The wire bytes: signed (the `sig` member appended) when a run key is given;
        without a key, as received (a received envelope keeps its signature, last)."""
        if key is None:
            return _json_of(self, with_sig=self.sig is not None)
        return signing.sign(key, _json_of(self, with_sig=False))


#: The fields `Envelope.built` is given (its `model_fields_set`, as `Envelope(...)`'s).
_BUILT_FIELDS = frozenset(Envelope.model_fields) - {"v", "id", "sig"}
#: Names already found valid (a run has a few: its id, its participants, "observers").
_NAMES: set[str] = set()
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def _valid_names(*names: str) -> bool:
    """Whether each of `names` is a valid `Name` (each checked once per process, up to
    a bound: past it, checked every time)."""
    for name in names:
        if type(name) is not str:  # a str subclass: validation makes it a str
            return False
        if name in _NAMES:
            continue
        if _NAME.fullmatch(name) is None:
            return False
        if len(_NAMES) < 4096:
            _NAMES.add(name)
    return True


#: The JSON of an envelope as pydantic writes it (fields in order, the same values), in
#: a third of the time; anything in a payload msgspec has no JSON for goes to pydantic.
#: Two differences: bytes are base64 (pydantic: UTF-8 text; no payload we build holds
#: any), and a float of 1e16 or more is `1e20` (pydantic: `1e+20`, the same number).
_ENCODER = msgspec.json.Encoder(enc_hook=lambda obj: _members_of(obj))
_NO_SIG = b',"sig":null}'


def _members_of(obj: object) -> dict[str, Any]:
    if type(obj) is WireError:
        return obj.__dict__
    raise NotImplementedError(type(obj).__name__)


def _json_of(env: Envelope, with_sig: bool) -> bytes:
    """`env`'s JSON, with or without its `sig` member (the last)."""
    members = env.__dict__
    if not with_sig and env.sig is not None:
        members = {k: v for k, v in members.items() if k != "sig"}
    try:
        raw = _ENCODER.encode(members)
    except (NotImplementedError, TypeError, OverflowError, ValueError):
        return env.model_dump_json(exclude=None if with_sig else {"sig"}).encode()
    return raw[: -len(_NO_SIG)] + b"}" if not with_sig and raw.endswith(_NO_SIG) else raw


class RejectedMessage(ErrorflowError):
    """A message that failed validation at the edge; `reason` is a short stable token."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def decode(raw: bytes, max_bytes: int = MAX_MESSAGE_BYTES) -> Envelope:
    """Parse and validate one wire message, or raise RejectedMessage (and only that)."""
    try:
        env = _decode(raw, max_bytes)
    except RejectedMessage:
        raise
    except Exception as exc:  # a bug or a limit we did not foresee: still a rejection
        raise RejectedMessage("undecodable", f"{type(exc).__name__}: {exc}"[:200]) from None
    if could_be_too_complex(raw):
        problem = payload_problem(env.payload)
        if problem is not None:
            raise RejectedMessage("payload_too_complex", problem)
    return env


def could_be_too_complex(raw: bytes) -> bool:
    """Whether `decode` walks the payload of `raw` for its limits. Counting brackets and
    commas is C-fast; only a message that could break a limit is walked (fewer brackets
    than the depth limit cannot nest deeper than it; a comma is a byte, so a message
    shorter than the value limit has fewer commas)."""
    many = raw.count(b"[") + raw.count(b"{") > MAX_PAYLOAD_DEPTH
    return many or (len(raw) >= MAX_PAYLOAD_VALUES and raw.count(b",") >= MAX_PAYLOAD_VALUES)


def payload_problem(payload: object) -> str | None:
    """Why a payload is too deep or too large to hand to a receiver, or None. Iterative:
    the check itself cannot overflow the stack."""
    stack: list[tuple[object, int]] = [(payload, 1)]
    values = 0
    while stack:
        node, depth = stack.pop()
        values += 1
        if values > MAX_PAYLOAD_VALUES:
            return f"more than {MAX_PAYLOAD_VALUES} values"
        if isinstance(node, dict | list):
            if depth > MAX_PAYLOAD_DEPTH:
                return f"nested deeper than {MAX_PAYLOAD_DEPTH} levels"
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return None


def _decode(raw: bytes, max_bytes: int) -> Envelope:
    if len(raw) > max_bytes:
        raise RejectedMessage("too_large", f"{len(raw)} bytes > limit {max_bytes}")
    try:  # fast path: pydantic parses and validates in one pass
        env = Envelope.model_validate_json(raw)
        if "v" in env.model_fields_set:  # the wire must state its version
            return env
    except ValidationError:
        pass  # the slow path below names the reason
    try:  # the same parser as the fast path: bounded recursion (json.loads is not)
        data = pydantic_core.from_json(raw)
    except ValueError as exc:
        raise RejectedMessage("bad_json", str(exc)[:200]) from None
    if not isinstance(data, dict):
        raise RejectedMessage("bad_shape", f"expected a JSON object, got {type(data).__name__}")
    if data.get("v") != SCHEMA_VERSION:
        raise RejectedMessage("wrong_version", f"v={data.get('v')!r}, expected {SCHEMA_VERSION}")
    try:
        return Envelope.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(root)"
        reason = "unknown_field" if first["type"] == "extra_forbidden" else "invalid"
        raise RejectedMessage(reason, f"{where}: {first['msg']}") from None


def json_schema() -> JsonObject:
    return Envelope.model_json_schema()
