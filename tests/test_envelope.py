import json
from enum import StrEnum
from typing import Any

import pytest
from pydantic import ValidationError

from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol.envelope import (
    MAX_MESSAGE_BYTES,
    MAX_PAYLOAD_DEPTH,
    Envelope,
    Kind,
    RejectedMessage,
    Status,
    WireError,
    decode,
    json_schema,
    payload_problem,
)


def make(**kw: object) -> Envelope:
    base: dict[str, object] = dict(
        run_id="r1",
        trial=3,
        seq=7,
        sender="researcher",
        recipient="writer",
        kind=Kind.RESULT,
        trace_id="t",
        status=Status.PARTIAL_FAILURE,
        confidence=0.4,
        errors=[WireError(code=ErrorCode.PERMISSION_DENIED, tool="search", origin="researcher")],
        payload={"answer": {"claims": []}},
    )
    base.update(kw)
    return Envelope.model_validate(base)


def test_round_trip_keeps_every_field() -> None:
    env = make()
    back = decode(env.encode())
    assert back == env
    assert back.errors[0].code is ErrorCode.PERMISSION_DENIED
    assert back.status is Status.PARTIAL_FAILURE


def test_wire_format_is_plain_json_with_the_design_fields() -> None:
    data = json.loads(make().encode())
    for key in (
        "v",
        "id",
        "run_id",
        "trial",
        "seq",
        "sender",
        "recipient",
        "kind",
        "trace_id",
        "derived_from",
        "status",
        "confidence",
        "errors",
        "payload",
    ):
        assert key in data
    assert data["v"] == 1
    assert data["errors"][0]["origin"] == "researcher"
    assert data["errors"][0]["hops"] == 0


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda d: d.update(extra=1), "unknown_field"),
        (lambda d: d.update(v=2), "wrong_version"),
        (lambda d: d.pop("v"), "wrong_version"),
        (lambda d: d.update(confidence=1.5), "invalid"),
        (lambda d: d.update(status="fine"), "invalid"),
        (lambda d: d.update(kind="gossip"), "invalid"),
        (lambda d: d.update(sender="bad/topic"), "invalid"),
        (lambda d: d["errors"][0].update(code="oops"), "invalid"),
        (lambda d: d["errors"][0].update(secret="x"), "unknown_field"),
        (lambda d: d.pop("sender"), "invalid"),
        (lambda d: d.update(seq=2**63), "invalid"),  # beyond SQLite's and the seen runs'
        (lambda d: d.update(seq=-1), "invalid"),
    ],
)
def test_strict_rejections(mutate: object, reason: str) -> None:
    data = json.loads(make().encode())
    mutate(data)  # type: ignore[operator]
    with pytest.raises(RejectedMessage) as info:
        decode(json.dumps(data).encode())
    assert info.value.reason == reason


def test_rejects_bad_json_shape_and_size() -> None:
    with pytest.raises(RejectedMessage, match="bad_json"):
        decode(b"{not json")
    with pytest.raises(RejectedMessage, match="bad_json"):
        decode(b"\xff\xfe\x00")
    with pytest.raises(RejectedMessage, match="bad_shape"):
        decode(b"[1, 2]")
    big = make(payload={"blob": "x" * MAX_MESSAGE_BYTES}).encode()
    with pytest.raises(RejectedMessage, match="too_large"):
        decode(big)


def test_schema_is_json_schema_of_the_envelope() -> None:
    schema = json_schema()
    assert schema["additionalProperties"] is False
    assert {"v", "run_id", "status", "errors", "payload"} <= set(schema["properties"])
    assert "WireError" in json.dumps(schema)


# -- decoding cannot fail open (issue #21) ------------------------------------------------
_BASE = {"v": 1, "run_id": "r", "trial": 0, "seq": 0, "sender": "a", "recipient": "b",
         "kind": "task", "trace_id": "t"}  # fmt: skip
DEEP_PAYLOAD = json.loads("[" * 40 + "]" * 40)
MANY_VALUES = list(range(30_000))


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "bad_json"),
        (b'{"v":1,"payload":' + b'{"a":' * 5000 + b"1" + b"}" * 5001, "bad_json"),
        (json.dumps({**_BASE, "payload": {"x": DEEP_PAYLOAD}}).encode(), "payload_too_complex"),
        (json.dumps({**_BASE, "payload": {"x": MANY_VALUES}}).encode(), "payload_too_complex"),
        (b"\xff\xfe\x00", "bad_json"),
    ],
)
def test_hostile_bytes_are_rejections_with_a_reason(raw: bytes, reason: str) -> None:
    with pytest.raises(RejectedMessage) as info:
        decode(raw)
    assert info.value.reason == reason


def test_a_payload_at_the_limits_is_accepted() -> None:
    nested: object = 1
    for _ in range(MAX_PAYLOAD_DEPTH - 1):
        nested = [nested]
    env = decode(json.dumps({**_BASE, "payload": {"x": nested}}).encode())
    assert payload_problem(env.payload) is None


def test_any_other_failure_while_decoding_is_a_rejection(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object, **__: object) -> object:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(Envelope, "model_validate_json", broken)
    with pytest.raises(RejectedMessage) as info:
        decode(json.dumps(_BASE).encode())
    assert info.value.reason == "undecodable"


def test_encode_writes_what_pydantic_writes_and_falls_back_for_what_it_cannot() -> None:
    odd = {"model": WireError(code=ErrorCode.TIMEOUT, origin="a"), "n": 2**70, "f": 1e-7}
    for env in (make(), make(payload=odd), make(payload={"text": "é\u2028\x00<>"})):
        assert env.encode() == env.model_dump_json(exclude={"sig"}).encode()
        signed = decode(env.encode(b"k" * 32))
        assert signed.encode() == signed.model_dump_json().encode()  # its signature, last


def test_a_signed_envelope_signed_again_is_signed_over_its_body_alone() -> None:
    first = decode(make().encode(b"k" * 32))
    again = first.encode(b"j" * 32)
    assert again.count(b'"sig"') == 1 and decode(again).sig != first.sig
    assert again[: again.rindex(b',"sig"')] == first.encode()[: first.encode().rindex(b',"sig"')]


def test_the_two_places_the_json_differs_from_pydantics_keep_their_values() -> None:
    env = make(payload={"b": b"ab", "f": 1e20})
    assert b'"b":"YWI="' in env.encode() and b'"f":1e20' in env.encode()  # base64; no "+"
    assert decode(env.encode(b"k" * 32)).payload == {"b": "YWI=", "f": 1e20}


def own_values(**update: object) -> dict[str, Any]:
    values: dict[str, Any] = {
        "run_id": "contamination-99da3e3f",
        "trial": 12,
        "seq": 2**62,
        "sender": "researcher",
        "recipient": "observers",
        "kind": Kind.EVENT,
        "trace_id": "contamination-99da3e3f-t12",
        "derived_from": ["a" * 32],
        "status": Status.PARTIAL_FAILURE,
        "confidence": 0.35,
        "errors": [WireError(code=ErrorCode.TIMEOUT, tool="search", origin="researcher")],
        "payload": {"type": "tool_call", "args": {"q": "x"}, "ok": False},
        "ts": 1796506629.1145031,
    }
    return {**values, **update}


def test_an_envelope_built_of_own_values_is_the_one_validation_builds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = own_values()
    validated = Envelope(**values)
    with monkeypatch.context() as patch:  # built without validation: never through __init__
        patch.setattr(Envelope, "__init__", lambda *_, **__: pytest.fail("validated"))
        built = Envelope.built(**values)
    # the same members in the same order, the same types, the same fields set
    assert list(built.__dict__) == list(validated.__dict__) == list(Envelope.model_fields)
    assert built == validated.model_copy(update={"id": built.id})
    assert built.model_fields_set == validated.model_fields_set
    assert built.encode(b"k") == validated.model_copy(update={"id": built.id}).encode(b"k")
    assert decode(built.encode(b"k")) == built.model_copy(
        update={"sig": decode(built.encode(b"k")).sig}
    )
    # copies, as validation makes them: the sender's lists and dict are its own
    assert built.payload is not values["payload"] and built.errors is not values["errors"]
    assert built.derived_from is not values["derived_from"]
    assert built.model_copy(update={"trial": 13}).trial == 13


@pytest.mark.parametrize(
    "update",
    [
        {"confidence": 1.5},
        {"confidence": -0.1},
        {"trial": -1},
        {"seq": 2**63},
        {"recipient": "no spaces"},
        {"sender": ""},
        {"run_id": "x" * 65},
        {"recipient": "trailing\n"},
        {"trace_id": ""},
        {"trace_id": "t" * 65},
        {"derived_from": ["a"] * 257},
        {"derived_from": [7]},
        {"errors": [{"code": "nonsense", "origin": "x"}]},
        {"payload": {1: "x"}},
        {"kind": "gossip"},
    ],
)
def test_an_envelope_built_of_bad_values_fails_as_validation_does(update: dict) -> None:
    with pytest.raises(ValidationError) as validated:
        Envelope(**own_values(**update))
    with pytest.raises(ValidationError) as built:
        Envelope.built(**own_values(**update))
    assert built.value.errors()[0]["loc"] == validated.value.errors()[0]["loc"]


class Role(StrEnum):
    RESEARCHER = "researcher"


@pytest.mark.parametrize("sender", ["researcher", Role.RESEARCHER])
def test_a_name_of_a_str_subclass_is_made_a_str(sender: str) -> None:
    Envelope.built(**own_values())  # "researcher" known valid
    built = Envelope.built(**own_values(sender=sender))
    assert type(built.sender) is str and built.sender == "researcher"


@pytest.mark.parametrize(
    "update",
    [
        {"confidence": 1},  # an int: validation makes it a float
        {"kind": "event"},  # a string: validation makes it the Kind
        {"status": "ok"},
        {"trial": True},
        {"errors": [{"code": "timeout", "origin": "x"}]},  # a dict: made a WireError
        {"ts": 5},
        {"trace_id": "t\u00e9"},  # not ASCII: validation looks at it
        {"derived_from": ["\u00e9"]},
    ],
)
def test_values_validation_would_convert_are_converted(update: dict) -> None:
    built, validated = Envelope.built(**own_values(**update)), Envelope(**own_values(**update))
    assert built == validated.model_copy(update={"id": built.id})
    assert [type(v) for v in built.__dict__.values()] == [
        type(v) for v in validated.__dict__.values()
    ]
