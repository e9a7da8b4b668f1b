"""HMAC envelope signatures: sign, verify, and the key's files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from errorflow.protocol import signing


def test_signed_bytes_are_json_with_a_sig_member_last() -> None:
    key = signing.new_key()
    wire = signing.sign(key, b'{"a":1,"b":"x"}')
    data = json.loads(wire)
    assert list(data) == ["a", "b", "sig"] and len(data["sig"]) == 64
    assert signing.verify(key, wire) is None


def test_other_key_or_changed_byte_is_a_bad_signature() -> None:
    key = signing.new_key()
    wire = signing.sign(key, b'{"sender":"writer","seq":3}')
    assert signing.verify(signing.new_key(), wire) == "bad_signature"
    assert signing.verify(key, wire.replace(b"writer", b"wr1ter")) == "bad_signature"
    assert signing.verify(key, wire.replace(b":3", b":4")) == "bad_signature"


@pytest.mark.parametrize(
    "raw",
    [b"", b"{}", b'{"a":1}', b'{"a":1,"sig":"abc"}', b'{"sig":"' + b"0" * 64 + b'"', b"[" * 99],
)
def test_unsigned_shapes(raw: bytes) -> None:
    assert signing.verify(signing.new_key(), raw) == "unsigned"


def test_key_file_is_private_and_round_trips(tmp_path: Path) -> None:
    key = signing.new_key()
    path = tmp_path / "run.key"
    signing.write_key_file(path, key)
    assert path.stat().st_mode & 0o777 == 0o600
    assert signing.read_key_file(path) == key
    os.chmod(path, 0o644)
    with pytest.raises(signing.RunKeyError, match="readable by others"):
        signing.read_key_file(path)


def test_bad_key_texts_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(signing.RunKeyError):
        signing.key_from_text("zz")
    with pytest.raises(signing.RunKeyError, match="64 hexadecimal"):
        signing.key_from_text("ab" * 8)
    monkeypatch.setenv(signing.KEY_ENV, "cd" * 32)
    assert signing.key_from_env() == bytes.fromhex("cd" * 32)


@pytest.mark.parametrize("kind", ["device", "fifo", "directory", "binary", "huge", "missing"])
def test_a_key_file_is_a_small_regular_text_file_or_one_line(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "run.key"
    said = {
        "device": "is a character device",
        "fifo": "is a named pipe",  # no writer: reading would block for ever
        "directory": "is a directory",
        "binary": "is not text",
        "huge": f"at most {signing.MAX_KEY_FILE_BYTES:,} bytes",
        "missing": "no such file",
    }[kind]
    if kind == "device":
        path = Path("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "directory":
        path.mkdir(mode=0o700)
    elif kind == "binary":
        path.write_bytes(bytes(range(128, 256)))
        path.chmod(0o600)
    elif kind == "huge":
        with path.open("wb") as f:
            f.truncate(13 << 30)  # /dev/zero's worth: refused before a byte is read
        path.chmod(0o600)
    with pytest.raises(signing.RunKeyError, match=said) as info:
        signing.read_key_file(path)
    assert "\n" not in str(info.value)
