"""The envelope nets: what of an envelope is searched, and what a redacted one keeps."""

from __future__ import annotations

from errorflow.bus.redaction import holds_secret, sealed
from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol.envelope import Envelope, Kind, WireError


def _env(**update: object) -> Envelope:
    fields: dict[str, object] = {
        "run_id": "r", "trial": 0, "seq": 1, "sender": "a", "recipient": "b",
        "kind": Kind.RESULT, "trace_id": "r-t0", "payload": {"answer": {"claims": []}},
    }  # fmt: skip
    return Envelope.model_validate({**fields, **update})


def test_errors_and_payload_are_searched_wherever_they_end() -> None:
    """The search spans the errors to the envelope's own `ts`, the last one in the text:
    a payload's own `ts` member does not end it early."""
    nested = _env(payload={"ts": 1, "then": "postgres://u:pw@db/x"})
    assert holds_secret(nested, nested.encode().decode())
    error = WireError(code=ErrorCode.PERMISSION_DENIED, origin="a", message="key=sk-abcdefgh1")
    failed = _env(errors=[error])
    assert holds_secret(failed, failed.encode().decode())
    clean = _env()
    assert not holds_secret(clean, clean.encode().decode())


def test_ids_are_searched_only_when_someone_else_built_the_envelope() -> None:
    """The store's net also searches the free-form ids (our own senders make them)."""
    env = _env(trace_id="ghp_abcdefghij1234", derived_from=["18ee0e8546"])
    text = env.encode().decode()
    assert not holds_secret(env, text)
    assert holds_secret(env, text, ids=True)
    assert not holds_secret(_env(), _env().encode().decode(), ids=True)


def test_a_redacted_envelope_keeps_everything_but_its_secrets() -> None:
    key = b"k" * 32
    error = WireError(code=ErrorCode.TRANSIENT, tool="db", origin="a", message="at /home/al/x")
    env = _env(errors=[error], payload={"n": 3, "dsn": "redis://:pw@cache:6379", "ok": True})
    clean, raw, _ = sealed(env, key)
    assert clean.model_dump(exclude={"payload", "errors"}) == env.model_dump(
        exclude={"payload", "errors"}
    )
    assert clean.payload == {"n": 3, "dsn": "[REDACTED_URL]", "ok": True}
    assert clean.errors[0].message == "at [PATH]" and clean.errors[0].tool == "db"
    assert raw == clean.encode(key)
    untouched = _env()
    assert sealed(untouched, key)[:2] == (untouched, untouched.encode(key))
