"""Reading a file a user names (a key file, a cassette, a CA certificate): a regular file
of a bounded size, or a one-line reason why not.

A path may name anything: `/dev/zero` never ends, a FIFO blocks its reader until a
writer comes, a directory cannot be read. So the path is looked at before it is opened
(`regular_stat`: a socket cannot even be opened), opened without blocking (a FIFO put
there meanwhile opens at once, then is refused), looked at again as opened, and read up
to the cap and one byte more (a file that grows while it is read is still refused).
Memory is bounded by the cap, whatever the path names.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from errorflow.core.errors import InputError

#: Non-blocking, so a FIFO opens at once (then is refused); never our terminal.
OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)

SPECIAL_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class FileRefused(InputError):
    """A path that is not a readable regular file within the cap. The message says why
    in one line, without the path (the caller names it as its option does)."""


def regular_stat(path: Path, cap: int) -> os.stat_result:
    """What `path` is, refused unless a regular file of at most `cap` bytes; nothing is
    opened."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise FileRefused("no such file") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise FileRefused(f"cannot be read: {_reason(exc)}") from None
    _refuse(info, cap)
    return info


def read_regular(path: Path, cap: int) -> bytes:
    """The bytes of the regular file at `path`, at most `cap` of them."""
    regular_stat(path, cap)
    try:
        fd = os.open(path, OPEN_FLAGS)
    except OSError as exc:
        raise FileRefused(f"cannot be read: {_reason(exc)}") from None
    with open(fd, "rb", closefd=True) as handle:
        _refuse(os.fstat(handle.fileno()), cap)  # what was opened, whatever the path became
        try:
            data = handle.read(cap + 1)
        except OSError as exc:
            raise FileRefused(f"cannot be read: {_reason(exc)}") from None
    if len(data) > cap:
        raise FileRefused(f"expected a file of at most {cap:,} bytes, found more")
    return data


def _refuse(info: os.stat_result, cap: int) -> None:
    for test, kind in SPECIAL_KINDS:
        if test(info.st_mode):
            raise FileRefused(f"is {kind}; expected a regular file")
    if not stat.S_ISREG(info.st_mode):
        raise FileRefused("is not a regular file; expected one")
    if info.st_size > cap:
        raise FileRefused(f"expected a file of at most {cap:,} bytes, found {info.st_size:,}")


def _reason(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
