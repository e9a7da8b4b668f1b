"""Reading a scenario file safely: a regular file, of a bounded size, in UTF-8.

A path may name anything: `/dev/zero` or `/dev/urandom` never end, a FIFO blocks its
reader until a writer comes, a directory cannot be read. So the file is opened without
blocking (`O_NONBLOCK`: a FIFO opens at once), refused unless it is a regular file,
refused if its size is over the limit before a byte is read, and read up to the limit
and one byte more (a file that grows while it is read is still refused). A decoding
error is reported at its line and column.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from errorflow.core.regular_file import OPEN_FLAGS, SPECIAL_KINDS
from errorflow.scenario.bundled import bundled
from errorflow.scenario.problems import LIMITS_HINT, ScenarioError, file_error

#: Files larger than this are refused before parsing (documented limit).
MAX_SCENARIO_BYTES = 1_000_000


def read_text(path: Path, file: str) -> str:
    """The text of the scenario file at `path`; every problem raises ScenarioError."""
    raw = _read_bytes(path, file)
    if b"\x00" in raw:
        raise file_error(file, "binary file (contains NUL bytes); expected a YAML text file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = raw.rfind(b"\n", 0, exc.start) + 1
        line = raw.count(b"\n", 0, exc.start) + 1
        column = len(raw[start : exc.start].decode("utf-8", "replace")) + 1
        msg = f"expected UTF-8 text, found byte 0x{raw[exc.start]:02x} (a binary file?)"
        raise file_error(file, msg, line, column) from None


def _read_bytes(path: Path, file: str) -> bytes:
    try:
        _refuse_special(os.stat(path).st_mode, file)  # a socket cannot even be opened
        fd = os.open(path, OPEN_FLAGS)
    except FileNotFoundError:
        raise file_error(file, _not_found()) from None
    except OSError as exc:
        raise file_error(file, f"cannot be read: {exc.strerror or exc}") from None
    with open(fd, "rb", closefd=True) as handle:
        info = os.fstat(handle.fileno())
        _refuse_special(info.st_mode, file)  # what was opened, whatever the path became
        if info.st_size > MAX_SCENARIO_BYTES:
            raise _too_large(file, info.st_size)
        try:
            raw = handle.read(MAX_SCENARIO_BYTES + 1)
        except OSError as exc:
            raise file_error(file, f"cannot be read: {exc.strerror or exc}") from None
    if len(raw) > MAX_SCENARIO_BYTES:
        raise _too_large(file, None)
    return raw


def _refuse_special(mode: int, file: str) -> None:
    for test, kind in SPECIAL_KINDS:
        if test(mode):
            what = "scenario file (YAML)" if kind == "a directory" else "regular file (YAML)"
            raise file_error(file, f"is {kind}; expected a {what}")
    if not stat.S_ISREG(mode):
        raise file_error(file, "is not a regular file; expected a scenario file (YAML)")


def _too_large(file: str, size: int | None) -> ScenarioError:
    found = f"{size}" if size is not None else "more"
    msg = f"expected at most {MAX_SCENARIO_BYTES} bytes, found {found} ({LIMITS_HINT})"
    return file_error(file, msg)


def _not_found() -> str:
    msg = "no such file; expected a scenario file"
    try:
        names = ", ".join(bundled())
    except OSError:
        names = ""
    return msg + (f" or a bundled scenario name ({names})" if names else "")
