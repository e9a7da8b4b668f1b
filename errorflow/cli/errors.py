"""The one error path of the command line: what a failure prints and its exit code.

A user's mistake (an argument, a `--set` path or value, a file, a port, an id) is
printed the way `errorflow validate` prints a scenario problem, `WHERE: [PATH:] MESSAGE`
(what is wrong, what was expected and found, and the closest valid choice), in one to
three lines on stderr with exit code 2; nothing has started, so nothing is stored. A
failure at run time (the broker, the store) is one line with exit code 1. No traceback:
errorflow's own exceptions (`ErrorflowError`) say what to print and the exit code, the
system's are read here; any other exception is a bug, and keeps its traceback.
"""

from __future__ import annotations

import errno
import os
import shlex
import sqlite3
from collections.abc import Iterable
from typing import TYPE_CHECKING

from errorflow.core.errors import (
    EXIT_FAILURE,
    EXIT_USAGE,
    MAX_LINES,
    ErrorflowError,
    InputError,
    clipped,
    first_line,
)
from errorflow.scenario.checks.wording import closest
from errorflow.scenario.problems import Problem

if TYPE_CHECKING:
    from errorflow.store.run_ids import IdLookupError

EXIT_OK = 0
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader went away (`| head`)

#: Candidates an ambiguous id lists before it says how many more there are.
SHOWN_CANDIDATES = 4
#: Bad input is said in at most `MAX_LINES` lines, each of a readable length: a longer
#: one keeps its start and its end (what was wrong, what was expected) and says how much
#: of the middle was cut.
MAX_LINE_CHARS = 600


def shown(text: str, limit: int = 60) -> str:
    """A value as an error message quotes it: whole, or its first `limit` characters and
    its length (a value of a megabyte is not repeated)."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} characters)"


class UsageError(InputError):
    """Bad input from the user: exit code 2. `where` is the option or argument at fault
    (`--trials`, `--set agents.x.policy.strategy=clasify`), `path` the scenario field,
    `heading` what kind of problem it is (`invalid scenario`, as `validate` heads its)."""

    def __init__(self, message: str, where: str = "", path: str = "", heading: str = "") -> None:
        self.message, self.where, self.path, self.heading = message, where, path, heading
        super().__init__(self.text)

    @property
    def text(self) -> str:
        problem = Problem(self.path, None, None, self.message)
        if self.where:
            line = problem.render(clipped(self.where))  # `validate`'s own formatter
        else:
            line = f"{self.path}: {self.message}" if self.path else self.message
        return f"{self.heading}: {line}" if self.heading else line


class RunFailure(ErrorflowError):
    """A run that could not be carried out (exit code 1), said in one line."""


class Interrupted(ErrorflowError):
    """Ctrl-C during a run (exit code 130); the text says how to resume it."""

    exit_code = EXIT_INTERRUPTED

    @property
    def text(self) -> str:
        return str(self)


def db_option(db: str) -> str:
    """` --db PATH` when PATH is not the default, for the commands we print."""
    from errorflow.store.opening import default_db

    return "" if db == str(default_db()) else f" --db {shlex.quote(db)}"


def id_problem(
    exc: IdLookupError,
    db: str,
    what: str = "run or group",
    option: str = "",
    known: Iterable[str] = (),
) -> UsageError:
    """An id that names no run, or several: say so, and list the ones it could be (or,
    for an unknown one, the closest of the `known` ids)."""
    from errorflow.store.run_ids import AmbiguousId

    where = f"{option} {exc.ident}".strip() or "''"
    if isinstance(exc, AmbiguousId):
        shown = ", ".join(exc.candidates[:SHOWN_CANDIDATES])
        more = len(exc.candidates) - SHOWN_CANDIDATES
        tail = f" and {more} more" if more > 0 else ""
        return UsageError(
            f"ambiguous: {len(exc.candidates)} ids start with it: {shown}{tail}; "
            "expected a longer prefix",
            where=where,
        )
    close = closest(exc.ident, known) if exc.ident else None
    hint = f"did you mean {close!r}?" if close else f"see `errorflow runs{db_option(db)}`"
    return UsageError(f"no {what} with this id or prefix in {db} ({hint})", where=where)


def explain(exc: BaseException) -> tuple[int, str] | None:
    """The exit code and the text of an error the command line knows; None for a bug.
    Bad input is said in at most `MAX_LINES` lines of at most `MAX_LINE_CHARS`."""
    known = _explained(exc)
    if known is None:
        return None
    code, text = known
    return code, bounded(text) if code == EXIT_USAGE else text


def _explained(exc: BaseException) -> tuple[int, str] | None:
    if isinstance(exc, ErrorflowError):  # errorflow's own: it says what is printed
        return exc.exit_code, exc.text
    if isinstance(exc, FileNotFoundError):
        return EXIT_USAGE, first_line(exc)
    if isinstance(exc, sqlite3.DatabaseError):  # an empty, foreign or damaged --db file
        message = f"not an errorflow store ({first_line(exc)}); expected one `errorflow run` wrote"
        return EXIT_USAGE, UsageError(message, where="--db").text
    if isinstance(exc, ConnectionError | TimeoutError):
        return EXIT_FAILURE, first_line(exc)
    if isinstance(exc, OSError):  # a path the system refused, or the system itself
        return _os_error(exc)
    return None


#: What the system says of a path a user named (too long, not a directory, not
#: permitted...): bad input. Any other OSError (a full disk, an I/O error) is a failure.
_PATH_ERRNOS = frozenset(
    {
        errno.ENAMETOOLONG,
        errno.ELOOP,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.EACCES,
        errno.EPERM,
        errno.EROFS,
        errno.EEXIST,
        errno.ENXIO,
        errno.ENODEV,
        errno.EINVAL,
    }
)


def _os_error(exc: OSError) -> tuple[int, str]:
    code = EXIT_USAGE if exc.errno in _PATH_ERRNOS else EXIT_FAILURE
    said = exc.strerror or first_line(exc)
    if exc.filename is None:
        return code, said
    return code, f"{clipped(os.fsdecode(exc.filename))}: {said}"


def bounded(text: str) -> str:
    """`text` in at most `MAX_LINES` lines of at most `MAX_LINE_CHARS` characters: the
    lines beyond are counted, a long line keeps its start and its end."""
    lines = text.splitlines() or [""]
    if len(lines) > MAX_LINES:
        more = len(lines) - (MAX_LINES - 1)
        lines = [*lines[: MAX_LINES - 1], f"(and {more:,} more problems)"]
    return "\n".join(_short_line(line) for line in lines)


def _short_line(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    head, tail = MAX_LINE_CHARS * 2 // 3, MAX_LINE_CHARS // 4
    cut = len(line) - head - tail
    return f"{line[:head]} ... ({cut:,} characters cut) ... {line[-tail:]}"
