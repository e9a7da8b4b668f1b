"""What this process sent over a broker comes back to its own receivers as the envelope
it built, when the bytes are exactly those it sent: not decoded, verified or searched
again; anything else is, and what depends on the receiver is still checked."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from errorflow.bus import admission as admission_module
from errorflow.bus.endpoint import Endpoint
from errorflow.bus.own_copies import OWN_COPIES, OwnCopies
from errorflow.bus.redaction import holds_secret
from errorflow.protocol import signing, topics
from errorflow.protocol.envelope import MAX_PAYLOAD_DEPTH, Envelope, Kind, decode
from errorflow.runtime.recorder import Recorder
from errorflow.store import rows as rows_module
from tests.test_endpoint import Captured

KEY = signing.new_key()
SECRET = "sk-ant-api03-" + "x" * 40


def _env(seq: int, run_id: str = "r", note: str = "fine") -> Envelope:
    return Envelope(
        run_id=run_id, trial=0, seq=seq, sender="a", recipient="b", kind=Kind.RESULT,
        trace_id="t", payload={"note": note},
    )  # fmt: skip


def test_copies_are_kept_for_open_runs_under_their_key_and_taken_once() -> None:
    copies = OwnCopies(size=2)
    env = _env(1)
    raw = env.encode(KEY)
    copies.keep(raw, env, KEY, True)
    assert copies.get(raw, KEY) is None  # no recorder here for run r: nothing kept
    copies.open("r")
    copies.keep(raw, env, KEY, True)
    own = copies.get(bytes(raw), KEY)  # equal bytes, another object
    assert own is not None and own.env is env and own.clean
    assert copies.get(raw, signing.new_key()) is None and copies.get(raw, None) is None
    assert copies.get(raw.replace(b"fine", b"fina"), KEY) is None  # one byte changed
    assert copies.take(raw, KEY) is not None and copies.take(raw, KEY) is None
    deep = _env(2).model_copy(update={"payload": {"x": [[[[1]]]] * MAX_PAYLOAD_DEPTH}})
    copies.keep(deep.encode(KEY), deep, KEY, True)  # decode would walk it: not kept
    assert len(copies) == 0
    for seq in (3, 4, 5):
        copies.keep(_env(seq).encode(KEY), _env(seq), KEY, True)
    assert len(copies) == 2 and copies.get(_env(3).encode(KEY), KEY) is None  # oldest went
    copies.close("r")
    assert len(copies) == 0
    copies.keep(raw, env, KEY, True)
    assert len(copies) == 0


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[list[bytes], list[str]]]:
    """The decodes receivers do, and the texts the store's net searches whole."""
    monkeypatch.setattr(OWN_COPIES, "_copies", {})
    decodes: list[bytes] = []
    searches: list[str] = []

    def decoded(raw: bytes) -> Envelope:
        decodes.append(raw)
        return decode(raw)

    def searched(env: Envelope, text: str, ids: bool = False) -> bool:
        searches.append(text)
        return holds_secret(env, text, ids)

    monkeypatch.setattr(admission_module, "decode", decoded)
    monkeypatch.setattr(rows_module, "holds_secret", searched)
    yield decodes, searches
    OWN_COPIES.close("r")


async def test_what_this_process_sent_is_read_as_sent(
    work: tuple[list[bytes], list[str]],
) -> None:
    decodes, searches = work
    recorder = Recorder(None, Captured(), "r", {"a", "b"}, key=KEY)  # type: ignore[arg-type]
    OWN_COPIES.open("r")  # as `Recorder.start` does
    conn = Captured()
    sender = Endpoint(conn, "r", "a", {"a", "b"}, key=KEY)
    sent = await sender.send(kind=Kind.RESULT, recipient="b", trial=0, trace_id="t")
    (topic, raw), *_ = conn.published
    receiver = Endpoint(Captured(), "r", "b", {"a", "b"}, key=KEY)
    assert receiver.check(topic, bytes(raw)) is sent  # the sender's own envelope
    outsider = Endpoint(Captured(), "r", "b", {"a", "b"}, key=signing.new_key())
    assert outsider.check(topic, raw) is None and outsider.rejects == {"bad_signature": 1}
    stranger = Endpoint(Captured(), "r", "b", {"c"}, key=KEY)
    assert stranger.check(topic, raw) is None and stranger.rejects == {"unknown_sender": 1}
    assert len(decodes) == 1  # only the outsider, whose key does not sign it
    recorder.handle(topic, raw)
    assert recorder.counts["result"] == 1 and searches == [] and len(decodes) == 1
    (row,) = recorder._messages
    assert row.envelope == raw.decode() and row.id == sent.id
    recorder.handle(topic, raw)  # again: taken, so decoded, and a duplicate
    assert recorder.rejects == {"duplicate": 1} and len(decodes) == 2


async def test_bytes_from_elsewhere_are_decoded_verified_and_searched(
    work: tuple[list[bytes], list[str]],
) -> None:
    decodes, searches = work
    recorder = Recorder(None, Captured(), "r", {"a", "b"}, key=KEY)  # type: ignore[arg-type]
    OWN_COPIES.open("r")
    elsewhere = _env(8, note=f"token {SECRET}").encode(KEY)  # another process's participant
    recorder.handle(topics.inbox("r", "b"), elsewhere)
    forged = _env(9).encode(signing.new_key())
    recorder.handle(topics.inbox("r", "b"), forged)
    assert len(decodes) == 2 and len(searches) == 1
    (row,) = recorder._messages
    assert SECRET not in row.envelope
    assert recorder.rejects == {"bad_signature": 1}
