"""What this process's redaction net sent as clean is not searched again by its recorder;
everything else is, and nothing secret is stored either way."""

from __future__ import annotations

import pytest

from errorflow.bus.cleared import CLEARED, Cleared
from errorflow.bus.endpoint import Endpoint
from errorflow.bus.redaction import holds_secret
from errorflow.protocol import signing, topics
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.runtime.recorder import Recorder
from errorflow.store import rows as rows_module
from tests.test_endpoint import Captured

KEY = signing.new_key()
SECRET = "sk-ant-api03-" + "x" * 40


def _raw(seq: int, key: bytes = KEY, note: str = "fine") -> bytes:
    env = Envelope(
        run_id="r", trial=0, seq=seq, sender="a", recipient="b", kind=Kind.RESULT,
        trace_id="t", payload={"note": note},
    )  # fmt: skip
    return env.encode(key)


def test_a_note_is_taken_once_and_only_for_its_bytes() -> None:
    cleared = Cleared(size=2)
    first, second, third = _raw(1), _raw(2), _raw(3)
    cleared.note(first)
    assert cleared.take(second) is False
    assert cleared.take(first) is True and cleared.take(first) is False
    unsigned = Envelope.model_validate_json(_raw(4)).model_copy(update={"sig": None}).encode()
    cleared.note(unsigned)  # no signature: nothing to note
    assert len(cleared) == 0 and cleared.take(unsigned) is False
    for raw in (first, second, third):
        cleared.note(raw)
    assert len(cleared) == 2 and not cleared.take(first)  # the oldest went


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the store's net searches whole (not only their ids)."""
    monkeypatch.setattr(CLEARED, "_sigs", {})
    texts: list[str] = []

    def counted(env: Envelope, text: str, ids: bool = False) -> bool:
        texts.append(text)
        return holds_secret(env, text, ids)

    monkeypatch.setattr(rows_module, "holds_secret", counted)
    return texts


async def test_what_a_sender_here_sent_clean_is_not_searched_again(searches: list[str]) -> None:
    recorder = Recorder(None, Captured(), "r", {"a", "b"}, key=KEY)  # type: ignore[arg-type]
    conn = Captured()
    sender = Endpoint(conn, "r", "a", {"a", "b"}, key=KEY)
    await sender.send(kind=Kind.RESULT, recipient="b", trial=0, trace_id="t", payload={"x": 1})
    (topic, raw), *_ = conn.published
    recorder.handle(topic, raw)
    assert recorder.counts["result"] == 1 and searches == []
    recorder.handle(topic, raw)  # the same bytes again: a duplicate, not stored
    elsewhere = _raw(7)  # signed by a participant in another process: no note
    recorder.handle(topics.inbox("r", "b"), elsewhere)
    assert searches == [elsewhere.decode()]


async def test_a_secret_from_elsewhere_is_still_redacted_before_it_is_stored(
    searches: list[str],
) -> None:
    recorder = Recorder(None, Captured(), "r", {"a", "b"}, key=KEY)  # type: ignore[arg-type]
    raw = _raw(8, note=f"token {SECRET}")
    CLEARED.note(_raw(9))  # a note for other bytes clears nothing else
    recorder.handle(topics.inbox("r", "b"), raw)
    (row,) = recorder._messages
    assert SECRET not in row.envelope and len(searches) == 1
