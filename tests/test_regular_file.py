"""Reading a file a user names: a regular file up to a cap, or a one-line refusal, with
nothing read from a device or a FIFO and nothing waited for."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from errorflow.core.regular_file import FileRefused, read_regular, regular_stat


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        yield path


def test_a_regular_file_is_read_whole_up_to_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    assert read_regular(path, 10) == b"x" * 10
    assert regular_stat(path, 10).st_size == 10
    with pytest.raises(FileRefused, match="at most 9 bytes, found 10"):
        read_regular(path, 9)


def test_a_huge_sparse_file_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "sparse"
    with path.open("wb") as f:
        f.truncate(13 << 30)
    with pytest.raises(FileRefused, match="found 13,958,643,712"):
        read_regular(path, 1024)


@pytest.mark.parametrize(
    ("kind", "said"),
    [("fifo", "named pipe"), ("dir", "a directory"), ("device", "character device"),
     ("socket", "a socket"), ("missing", "no such file"), ("link to device", "character")],
)  # fmt: skip
def test_anything_but_a_regular_file_is_refused_at_once(
    kind: str, said: str, tmp_path: Path, unix_socket: Path
) -> None:
    path = tmp_path / "x"
    if kind == "fifo":
        os.mkfifo(path)  # no writer: an open for reading would block
    elif kind == "dir":
        path.mkdir()
    elif kind == "device":
        path = Path("/dev/zero")  # never ends
    elif kind == "socket":
        path = unix_socket
    elif kind == "link to device":
        path.symlink_to("/dev/urandom")
    with pytest.raises(FileRefused, match=said) as info:
        read_regular(path, 1 << 20)
    assert "\n" not in str(info.value)


def test_a_path_the_system_refuses_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(FileRefused, match="cannot be read: File name too long"):
        read_regular(tmp_path / ("x" * 300), 10)
    with pytest.raises(FileRefused, match="cannot be read"):
        read_regular(Path("a\0b"), 10)
