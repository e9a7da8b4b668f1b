"""Paths named on the command line: one the system can take, a directory where one is
expected, and an output that is written or refused at once (never a hang on a FIFO
nobody reads)."""

from __future__ import annotations

import argparse
import os
import threading
from pathlib import Path

import pytest

from errorflow.cli.errors import UsageError
from errorflow.cli.paths import (
    NAME_MAX,
    PATH_MAX,
    check_directory,
    path_arg,
    write_output,
)


@pytest.mark.parametrize(
    ("text", "said"),
    [("", "1 to 4096 bytes"), ("a/" * 3000, "found 6,000 bytes"), ("x" * 300, "found one of 300")],
)
def test_a_path_the_system_cannot_take_is_refused(text: str, said: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=said) as info:
        path_arg(text)
    assert len(str(info.value)) < 200
    assert path_arg("d/" + "x" * NAME_MAX) and len("x" * PATH_MAX) == PATH_MAX


def test_a_directory_option_takes_a_directory_or_nothing(tmp_path: Path) -> None:
    assert check_directory(str(tmp_path / "new"), "--cache") == tmp_path / "new"
    assert check_directory(str(tmp_path), "--cache") == tmp_path
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero"), Path(__file__)):
        with pytest.raises(UsageError, match="is not a directory"):
            check_directory(str(path), "--cache")


def test_an_output_is_written_or_refused_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    write_output(str(out), "report\n", "-o")
    assert out.read_text() == "report\n"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cases = {fifo: "nobody reads", tmp_path: "is a directory", tmp_path / "no/r.md": "cannot"}
    if Path("/dev/full").exists():
        cases[Path("/dev/full")] = "No space left on device"
    for path, said in cases.items():
        with pytest.raises(UsageError, match=said) as info:
            write_output(str(path), "x" * 100_000, "-o")
        assert "\n" not in info.value.text


def test_a_fifo_someone_reads_is_written(tmp_path: Path) -> None:
    """`-o >(gzip)` is a pipe with a reader: written whole, however slow the reader."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    data = "y" * 1_000_000  # more than a pipe holds: the writer must block, not fail
    for _ in range(100):  # until the reader has the FIFO open
        try:
            write_output(str(fifo), data, "-o")
            break
        except UsageError:
            threading.Event().wait(0.02)
    reader.join(timeout=10)
    assert got == [data.encode()]
