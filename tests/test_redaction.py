"""The envelope nets: what of an envelope is searched, and what a redacted one keeps."""

from __future__ import annotations

import json
import re
import re._constants as sre
import re._parser as sre_parse
from typing import Any

import pytest

from errorflow.bus import redaction
from errorflow.bus.admission import admission
from errorflow.bus.redaction import holds_secret, sealed
from errorflow.core import redact
from errorflow.core.redact import might_hold_secret
from errorflow.core.short_memo import ShortMemo
from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol import signing
from errorflow.protocol.envelope import Envelope, Kind, WireError
from errorflow.store.rows import MessageRow


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


def test_a_part_is_searched_once_and_a_long_one_every_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    searched: list[str] = []

    def counting(text: str, start: int = 0, end: int | None = None) -> bool:
        searched.append(text[start:end])
        return might_hold_secret(text, start, end)

    monkeypatch.setattr(redaction, "might_hold_secret", counting)
    redaction._SUSPECT.clear()
    clean = _env(payload={"type": "agent_start", "agent": "a"})
    suspect = _env(payload={"dsn": "redis://:pw@cache:6379"})
    for _ in range(3):
        assert not holds_secret(clean, clean.encode().decode())
        assert holds_secret(suspect, suspect.encode().decode())
    assert len(searched) == 2  # each part once: the answer is kept
    long = _env(payload={"text": "a" * redaction.PART_LONGEST})
    for _ in range(2):
        assert not holds_secret(long, long.encode().decode())
    assert len(searched) == 4  # too long to be kept: searched in place each time


def test_the_answers_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    bounded = ShortMemo(redaction._part_suspect, redaction.PART_LONGEST, kept=8)
    monkeypatch.setattr(redaction, "_SUSPECT", bounded)
    for n in range(20):
        env = _env(payload={"n": n})
        assert not holds_secret(env, env.encode().decode())
        assert bounded.size() <= 8
    assert bounded.size() == 8


@pytest.mark.parametrize("where", ["first", "after_ts"])
def test_an_outsiders_payload_is_searched_wherever_its_members_put_it(where: str) -> None:
    """Someone else's JSON may put its members in any order: a payload before the errors
    or after `ts` is searched too, and the store keeps it redacted."""
    env = _env(payload={"password": "hunter2", "note": "sk-abcdefgh12345678"})
    members = json.loads(env.encode())
    payload = members.pop("payload")
    members = (
        {"payload": payload, **members} if where == "first" else {**members, "payload": payload}
    )
    key = signing.new_key()
    raw = signing.sign(key, json.dumps(members, separators=(",", ":")).encode())
    received, reason, clean = admission(raw, env.run_id, None, key)
    assert reason is None and not clean
    assert holds_secret(received, raw.decode(), ids=True)
    stored = MessageRow.from_envelope(received, "t", 0.0, raw.decode(), clean).envelope
    assert "hunter2" not in stored and "sk-abcdefgh" not in stored
    assert json.loads(stored)["payload"]["password"] == "[REDACTED]"


def _look_behinds(pattern: re.Pattern[str]) -> tuple[list[Any], list[Any]]:
    """The look-behind assertions of `pattern` and its anchors, from its parse tree."""
    behinds: list[Any] = []
    anchors: list[Any] = []

    def walk(items: Any) -> None:
        for op, arg in items:
            if op in (sre.ASSERT, sre.ASSERT_NOT):
                direction, sub = arg
                if direction == -1:
                    behinds.append(sub)
                walk(sub)
            elif op is sre.AT:
                anchors.append(arg)
            elif op is sre.SUBPATTERN:
                walk(arg[3])
            elif op is sre.BRANCH:
                for branch in arg[1]:
                    walk(branch)
            elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
                walk(arg[2])

    walk(sre_parse.parse(pattern.pattern, pattern.flags))
    return behinds, anchors


def _can_match(sub: Any, char: str) -> bool:
    """Whether any single-character item of the parsed `sub` can match `char`."""
    for op, arg in sub:
        if op is sre.LITERAL and chr(arg) == char:
            return True
        if op in (sre.NOT_LITERAL, sre.ANY, sre.CATEGORY):
            return True  # (conservative)
        if op is sre.IN and any(
            (o is sre.LITERAL and chr(a) == char)
            or (o is sre.RANGE and a[0] <= ord(char) <= a[1])
            or o not in (sre.LITERAL, sre.RANGE)
            for o, a in arg
        ):
            return True
        if op is sre.SUBPATTERN and _can_match(arg[3], char):
            return True
        if op is sre.BRANCH and any(_can_match(b, char) for b in arg[1]):
            return True
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and _can_match(arg[2], char):
            return True
    return False


def test_no_look_behind_of_the_search_can_match_the_comma_a_searched_part_begins_with() -> None:
    """Why a part of an envelope searched alone (and remembered clean) answers as it does
    in place: the search has no anchors, and no look-behind can match the `,` of
    `,"errors":` the part begins with, so none can reach before it."""
    for pattern in (redact._CLUES, redact._ENV_EQUALS, redact._ENV_CLUES):
        behinds, anchors = _look_behinds(pattern)
        assert not anchors
        assert not [b for b in behinds if _can_match(b, ",")]
    assert behinds  # the walk does find them (the clue patterns have dozens)
    assert _can_match(sre_parse.parse(r"(?<=a|[,b])x")[0][1][1], ",")
