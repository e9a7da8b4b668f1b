"""The envelope nets: what of an envelope is searched, and what a redacted one keeps."""

from __future__ import annotations

import pytest

from errorflow.bus import redaction
from errorflow.bus.redaction import holds_secret, sealed
from errorflow.core.redact import might_hold_secret
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


def test_the_part_searched_alone_gives_the_answer_it_gives_in_its_envelope() -> None:
    """The net remembers clean parts by their text: the part (from `,"errors":`) searched
    alone must answer as it does where it stands, whatever comes before it."""
    secrets = ["sk-abcdefgh12345678", "ghp_abcdefghijklmnop", "password=hunter2",
               "postgres://u:pw@db/x", "/home/al/x", "AKIAABCDEFGHIJKLMNOP",
               "Bearer abc.def", "eyJhbGciOi", "SECRET_KEY=x", 'api_key\\": \\"v']  # fmt: skip
    befores = ["", '"confidence":1.0', "private_", "api", "tok", "\\n", "\\u00e9", "_",
               "x" * 30, '"a":"secret', "access-"]  # fmt: skip
    fillers = ["", "[", '[{"message":"', " ", "-", "\\n", "\\u0041"]
    for before in befores:
        for filler in fillers:
            for secret in [*secrets, "clean words only"]:
                text = f'{{"id":"x",{before},"errors":{filler}{secret}]","ts":1.0}}'
                start, end = text.find(',"errors":'), text.rfind(',"ts":')
                alone = might_hold_secret(text[start:end])
                assert might_hold_secret(text, start, end) == alone, text


def test_a_clean_part_is_searched_once_and_a_suspect_one_every_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    searched: list[str] = []

    def counting(text: str, start: int = 0, end: int | None = None) -> bool:
        searched.append(text[start:end])
        return might_hold_secret(text, start, end)

    monkeypatch.setattr(redaction, "might_hold_secret", counting)
    monkeypatch.setattr(redaction, "_CLEAN", set())
    clean = _env(payload={"type": "agent_start", "agent": "a"})
    suspect = _env(payload={"dsn": "redis://:pw@cache:6379"})
    for _ in range(3):
        assert not holds_secret(clean, clean.encode().decode())
        assert holds_secret(suspect, suspect.encode().decode())
    assert len(searched) == 4  # the clean part once, the suspect one each time
    long = _env(payload={"text": "a" * redaction.CLEAN_LONGEST})
    for _ in range(2):
        assert not holds_secret(long, long.encode().decode())
    assert len(searched) == 6  # too long to be kept: searched in place each time


def test_the_clean_parts_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redaction, "_CLEAN", set())
    monkeypatch.setattr(redaction, "CLEAN_KEPT", 8)
    for n in range(20):
        env = _env(payload={"n": n})
        assert not holds_secret(env, env.encode().decode())
        assert len(redaction._CLEAN) <= 8
