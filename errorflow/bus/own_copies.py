"""What this process sent over a broker, by its bytes, for its own receivers.

On the in-process bus a receiver gets the envelope its sender built (`Posted`): built
and validated here, redacted, never decoded or verified again. Over a broker the same
process's receivers (the recipient, the runner that hears every inbox, the recorder
that hears everything) got bytes and decoded, validated and verified them, and the
recorder searched them for secrets, each time a third of what the message had cost to
send. A message that comes back from the broker byte for byte as one of this process's
endpoints sent it is that endpoint's envelope: the copy kept when it was sent serves
instead. Equal bytes are the whole test (the dictionary compares them in full), so
bytes changed on the way, or sent by anyone else, are decoded and verified as before;
what depends on the receiver (its run, who it accepts, the seqs it has seen) is checked
by each. Kept only when `decode` would not walk the payload for its limits, so a copy
is accepted exactly when its bytes would be.

Kept only for the runs whose recorder is in this process (`open`), which takes each
copy as it files the message; a copy it never gets (the message lost on the way) goes
with the run (`close`), or as the oldest past `SIZE`.
"""

from __future__ import annotations

from typing import NamedTuple

from errorflow.protocol.envelope import MAX_MESSAGE_BYTES, Envelope, could_be_too_complex

#: Copies kept at most (as many as a connection's inbox holds): what the recorder has not
#: filed yet and messages lost on the way.
SIZE = 10_000


class OwnCopy(NamedTuple):
    env: Envelope
    key: bytes | None  # the run key it was signed with
    clean: bool  # the redaction net found nothing in its text (see `sealed`)


class OwnCopies:
    def __init__(self, size: int = SIZE) -> None:
        self.size = size
        self._copies: dict[bytes, OwnCopy] = {}
        self._runs: set[str] = set()

    def open(self, run_id: str) -> None:
        """Keep copies of `run_id`'s messages (its recorder is in this process)."""
        self._runs.add(run_id)

    def close(self, run_id: str) -> None:
        self._runs.discard(run_id)
        self._copies = {raw: c for raw, c in self._copies.items() if c.env.run_id != run_id}

    def keep(self, raw: bytes, env: Envelope, key: bytes | None, clean: bool) -> None:
        """`raw` is what an endpoint here published of `env`, signed with `key`."""
        if env.run_id not in self._runs:
            return
        if len(raw) > MAX_MESSAGE_BYTES or could_be_too_complex(raw):
            return  # its receivers decode it (and may refuse it), as anyone's
        copies = self._copies
        if len(copies) >= self.size:
            del copies[next(iter(copies))]
        copies[raw] = OwnCopy(env, key, clean)

    def get(self, raw: bytes, key: bytes | None) -> OwnCopy | None:
        """The copy of `raw` if it was signed with `key` (what verifying it would say)."""
        own = self._copies.get(raw)
        return own if own is not None and own.key == key else None

    def take(self, raw: bytes, key: bytes | None) -> OwnCopy | None:
        """`get`, and the copy goes (the recorder files each message once)."""
        own = self._copies.pop(raw, None)
        return own if own is not None and own.key == key else None

    def __len__(self) -> int:
        return len(self._copies)


#: The process's own: endpoints keep, receivers read, the recorder takes.
OWN_COPIES = OwnCopies()
