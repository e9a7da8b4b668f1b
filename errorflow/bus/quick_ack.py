"""A quick TCP ACK after a read that sends nothing back, so a broker's Nagle never waits
for our delayed ACK.

Mosquitto leaves Nagle on by default (`set_tcp_nodelay false`): it holds a small packet
for a client while the client has not acknowledged the one before. Linux delays that ACK
(up to 40 ms) when the client has nothing to send back to carry it, which is what a
client does after a PUBACK or a message it only reads. Each hop of a trial then waited
about 40 ms: a one-trial run on a default Mosquitto took ~165 ms of messaging, not ~9.
The broker is not ours to configure (the README still advises `set_tcp_nodelay true`),
so the client asks its kernel to ACK at once, after a read whose turn of the event loop
writes nothing. A read answered in the same turn (a PUBACK for a message) carries its
ACK anyway: a busy connection makes no extra system calls. Linux only (`TCP_QUICKACK`);
elsewhere nothing is done.
"""

from __future__ import annotations

import contextlib
import socket
from typing import Protocol

_QUICKACK = getattr(socket, "TCP_QUICKACK", None)


class _Socket(Protocol):
    def setsockopt(self, level: int, option: int, value: int, /) -> None: ...


def quick_ack(sock: _Socket | None) -> None:
    """ACK what `sock` has received now, not after the delayed-ACK timer."""
    if _QUICKACK is None or sock is None:
        return
    with contextlib.suppress(OSError):  # closed under us: its end is reported elsewhere
        sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
