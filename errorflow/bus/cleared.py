"""Signatures of what this process's redaction net sent as clean, for the store's net.

Every envelope an endpoint sends passes the redaction net (`bus.redaction.redacted`),
and every one the recorder stores passes the store's (`store.rows`): on a broker, the
recorder of a run searched the very bytes its agents in the same process had searched a
moment before. The sender now notes the signature of bytes its net found clean; the
recorder, having verified the signature under the run key, takes the note instead of
searching again (it still searches the free-form ids, as it does for a `Posted`
envelope). A verified signature stands for exactly the bytes that were signed, so the
note cannot clear other bytes, and what no note covers (a participant in another
process, an unsigned run) is searched as before.

Bounded (the oldest note goes first): a note the recorder never takes (its message
went elsewhere, or the recorder is in another process) costs nothing but its place.
"""

from __future__ import annotations

from errorflow.protocol.signing import signature

#: Notes kept: the recorder takes each within a few turns of the event loop.
SIZE = 4096


class Cleared:
    def __init__(self, size: int = SIZE) -> None:
        self.size = size
        self._sigs: dict[bytes, None] = {}

    def note(self, raw: bytes) -> None:
        """`raw` (signed) was found clean by this process's net."""
        sig = signature(raw)
        if sig is None:
            return
        sigs = self._sigs
        if len(sigs) >= self.size:
            del sigs[next(iter(sigs))]
        sigs[sig] = None

    def take(self, raw: bytes) -> bool:
        """Whether `raw`, whose signature the caller has verified, was found clean here
        (once: the note goes)."""
        sig = signature(raw)
        if sig is None or sig not in self._sigs:
            return False
        del self._sigs[sig]
        return True

    def __len__(self) -> int:
        return len(self._sigs)


#: The process's own: endpoints note, the recorder takes.
CLEARED = Cleared()
