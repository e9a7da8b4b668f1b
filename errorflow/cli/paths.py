"""Paths a user names on the command line (`--db`, `--key-file`, `--cache`, `-o`, a
scenario file), checked before they are used, so a path that cannot be one is one line.

A path is at most `PATH_MAX` bytes with names of at most `NAME_MAX` (longer, every
system call on it fails, wherever that happens to be). A file a command writes is not a
directory, and not a FIFO nobody reads: it is opened without blocking, so a pipe with no
reader is refused at once instead of hanging the command (a pipe with a reader, such as
`-o >(gzip)`, and `/dev/null` are written as files are). Files a command reads are read
by errorflow.core.regular_file (a regular file, up to a cap).
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import os
import stat
from pathlib import Path

from errorflow.cli.errors import UsageError, shown

#: Linux's limits on a path and on one name in it (bytes).
PATH_MAX = 4096
NAME_MAX = 255

_WRITE_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_TRUNC
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def path_arg(text: str) -> str:
    """An argparse type: a path the system can take (`PATH_MAX`, `NAME_MAX`)."""
    size = len(os.fsencode(text))
    if not text or size > PATH_MAX:
        raise argparse.ArgumentTypeError(
            f"expected a path of 1 to {PATH_MAX} bytes, found {size:,} bytes"
        )
    longest = max(len(os.fsencode(name)) for name in text.split(os.sep))
    if longest > NAME_MAX:
        raise argparse.ArgumentTypeError(
            f"expected names of at most {NAME_MAX} bytes in a path, found one of "
            f"{longest:,}: {shown(text)}"
        )
    return text


def check_directory(text: str, option: str) -> Path:
    """A directory option (`--cache DIR`): absent (it is made when needed) or a
    directory, never a file of another kind."""
    path = Path(text)
    try:
        info = path.stat()
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise UsageError(f"cannot be used: {exc.strerror}", where=f"{option} {text}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise UsageError("is not a directory; expected one", where=f"{option} {text}")
    return path


def write_output(text: str, data: str, option: str) -> None:
    """Write `data` (UTF-8) to the file a command's `option` names."""
    where = f"{option} {text}"
    try:
        if Path(text).is_dir():
            raise UsageError("is a directory; expected a file to write", where=where)
        fd = os.open(text, _WRITE_FLAGS, 0o666)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO no process reads: writing would block
            raise UsageError(
                "is a named pipe (FIFO) nobody reads; expected a file", where=where
            ) from None
        raise UsageError(f"cannot write there: {exc.strerror}", where=where) from None
    try:
        with open(fd, "w", encoding="utf-8", closefd=True) as handle:
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)  # blocking again: a pipe's reader may lag
            fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
            handle.write(data)
    except OSError as exc:  # a full disk, /dev/full
        raise UsageError(f"cannot write there: {exc.strerror}", where=where) from None
