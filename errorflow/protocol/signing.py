"""Authenticated envelopes: HMAC-SHA256 with a per-run key.

Theory of operation. The runner creates a random 32-byte key per run. It never travels
on the bus: in-process agents get it as an argument, `errorflow agent` processes from
`ERRORFLOW_RUN_KEY` or a key file only its owner can read. The sender encodes the
envelope without its signature (`body`, compact JSON ending in `}`) and appends the
signature as the last member: `body[:-1] + ',"sig":"<64 hex>"}'`. A receiver cuts the
member off again and recomputes the MAC over exactly the bytes that were signed, so the
check needs no re-encoding and an agent in another language can do the same. The body
holds the run id, trial, sender, recipient, kind and seq, so the signature binds them:
a message of another run (another key), a forged sender or a rewritten field fails.
Replays of a valid message inside the run are dropped by message id (`SeenSet`).

What it does not protect: anything a participant holding the key sends (a compromised
agent process is inside the trust boundary), and confidentiality (use TLS for that).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from errorflow.core.errors import InputError
from errorflow.core.regular_file import FileRefused, read_regular, regular_stat

KEY_BYTES = 32
SIG_HEX = 64
KEY_ENV = "ERRORFLOW_RUN_KEY"
#: A key file holds 64 hexadecimal characters and a newline; anything much larger is
#: not one (and is not read whole).
MAX_KEY_FILE_BYTES = 4096
_MEMBER = b',"sig":"'
_TAIL = len(_MEMBER) + SIG_HEX + 2  # ,"sig":" + hex + "}


class RunKeyError(InputError, ValueError):
    """A run key that cannot be used (wrong length, unreadable or too open a file)."""

    where = "run key"


def new_key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


@functools.lru_cache(maxsize=16)
def _keyed(key: bytes) -> hmac.HMAC:
    """An HMAC with the key already mixed in; each message starts from a copy (the key
    setup is a third of the cost of a short message)."""
    return hmac.new(key, digestmod=hashlib.sha256)


def sign(key: bytes, body: bytes) -> bytes:
    """The wire bytes of an encoded envelope (`body`, a JSON object) with its signature."""
    mac = _keyed(key).copy()
    mac.update(body)
    return body[:-1] + _MEMBER + mac.hexdigest().encode() + b'"}'


def _cut(raw: bytes) -> int | None:
    """Where the signature member starts; None if the last member is no signature."""
    cut = len(raw) - _TAIL
    if cut <= 0 or not raw.endswith(b'"}') or raw[cut : cut + len(_MEMBER)] != _MEMBER:
        return None
    return cut


def verify(key: bytes, raw: bytes) -> str | None:
    """None if `raw` carries a valid signature under `key`; else the rejection reason.
    The MAC reads the body in place (no copy of the message)."""
    cut = _cut(raw)
    if cut is None:
        return "unsigned"
    mac = _keyed(key).copy()
    mac.update(memoryview(raw)[:cut])
    mac.update(b"}")
    sig = raw[cut + len(_MEMBER) : -2]
    return None if hmac.compare_digest(mac.hexdigest().encode(), sig) else "bad_signature"


def key_to_text(key: bytes) -> str:
    return key.hex()


def key_from_text(text: str) -> bytes:
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        raise RunKeyError("a run key is 64 hexadecimal characters") from None
    if len(key) != KEY_BYTES:
        raise RunKeyError(
            f"a run key is {KEY_BYTES * 2} hexadecimal characters, got {len(key) * 2}"
        )
    return key


def write_key_file(path: Path, key: bytes) -> None:
    """Write the key readable by its owner only (created 0600, never widened)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key_to_text(key) + "\n")
    os.chmod(path, 0o600)


def read_key_file(path: Path) -> bytes:
    """The key in `path`: a regular file only its owner can read, holding the key as
    text (a device, a FIFO or a file of another kind is refused unread)."""
    try:
        mode = regular_stat(path, MAX_KEY_FILE_BYTES).st_mode
        raw = read_regular(path, MAX_KEY_FILE_BYTES)
    except FileRefused as exc:
        raise RunKeyError(f"the run key file {_named(path)}: {exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise RunKeyError(
            f"the run key file {_named(path)} is readable by others (chmod 600 {_named(path)})"
        )
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise RunKeyError(
            f"the run key file {_named(path)} is not text; expected "
            f"{KEY_BYTES * 2} hexadecimal characters"
        ) from None
    return key_from_text(text)


def _named(path: Path) -> str:
    """The file's name as a message shows it (a hostile name is not repeated whole)."""
    name = path.name or str(path)
    return name if len(name) <= 80 else f"{name[:60]}... ({len(name)} characters)"


def key_from_env() -> bytes | None:
    text = os.environ.get(KEY_ENV)
    return key_from_text(text) if text else None
