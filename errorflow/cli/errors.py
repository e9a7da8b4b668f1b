"""The one error path of the command line: what a failure prints and its exit code.

A user's mistake (an argument, a `--set` path or value, a file, a port, an id) is
printed the way `errorflow validate` prints a scenario problem, `WHERE: [PATH:] MESSAGE`
(what is wrong, what was expected and found, and the closest valid choice), in one to
three lines on stderr with exit code 2; nothing has started, so nothing is stored. A
failure at run time (the broker, the store) is one line with exit code 1. No traceback:
an exception no handler here knows is a bug, and keeps its traceback.
"""

from __future__ import annotations

import errno
import os
import shlex
import sqlite3
from collections.abc import Iterable
from typing import TYPE_CHECKING

from errorflow.bus.url import BrokerURLError
from errorflow.protocol.signing import RunKeyError
from errorflow.scenario.checks.wording import closest
from errorflow.scenario.problems import Problem, ScenarioError

if TYPE_CHECKING:
    from errorflow.store.database import IdLookupError

# Every command imports this module, `errorflow --help` too: the runtime's exceptions
# are imported where they are looked at (`explain`), not here (about half a second).

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader went away (`| head`)

#: Candidates an ambiguous id lists before it says how many more there are.
SHOWN_CANDIDATES = 4
#: Bad input is said in one to three lines (README, "Commands")...
MAX_LINES = 3
#: ...each of a readable length: a longer one keeps its start and its end (what was
#: wrong, what was expected) and says how much of the middle was cut.
MAX_LINE_CHARS = 600
#: An option or value a message quotes longer than this is shown by its start and length.
MAX_QUOTED_CHARS = 200


def shown(text: str, limit: int = 60) -> str:
    """A value as an error message quotes it: whole, or its first `limit` characters and
    its length (a value of a megabyte is not repeated)."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} characters)"


def clipped(text: str) -> str:
    """An option as a message names it (`--db PATH`): whole up to `MAX_QUOTED_CHARS`,
    else its first 60 characters and its length."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)  # one line
    if len(text) <= MAX_QUOTED_CHARS:
        return text
    return f"{text[:60]}... ({len(text):,} characters)"


class UsageError(Exception):
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


class RunFailure(Exception):
    """A run that could not be carried out (exit code 1), said in one line."""


class Interrupted(Exception):
    """Ctrl-C during a run (exit code 130); the text says how to resume it."""


def db_option(db: str) -> str:
    """` --db PATH` when PATH is not the default, for the commands we print."""
    from errorflow.store.database import default_db

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
    from errorflow.store.database import AmbiguousId

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
    if isinstance(exc, UsageError):  # the commonest (a mistyped argument): nothing to import
        return EXIT_USAGE, exc.text
    from errorflow.models.backend import InfrastructureError
    from errorflow.models.backends import ConfigurationError
    from errorflow.scenario.overrides import OverrideError
    from errorflow.store.database import StoreError, UnusableStore

    if isinstance(exc, ScenarioError):
        return EXIT_USAGE, scenario_text(exc)
    if isinstance(exc, BrokerURLError):
        return EXIT_USAGE, UsageError(str(exc), where="--broker").text
    if isinstance(exc, RunKeyError):
        return EXIT_USAGE, UsageError(str(exc), where="run key").text
    if isinstance(exc, UnusableStore):  # a directory, not SQLite, locked, read-only
        message = f"{exc.reason}; expected {exc.expected}"
        return EXIT_USAGE, UsageError(message, where=f"--db {exc.path}").text
    if isinstance(exc, ConfigurationError | OverrideError | FileNotFoundError):
        return EXIT_USAGE, _one_line(exc)
    if isinstance(exc, Interrupted):
        return EXIT_INTERRUPTED, str(exc)
    if isinstance(exc, sqlite3.DatabaseError):  # an empty, foreign or damaged --db file
        message = f"not an errorflow store ({_one_line(exc)}); expected one `errorflow run` wrote"
        return EXIT_USAGE, UsageError(message, where="--db").text
    infrastructure = RunFailure | InfrastructureError | ConnectionError | TimeoutError | StoreError
    if isinstance(exc, infrastructure):
        return EXIT_FAILURE, _one_line(exc)
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
    said = exc.strerror or _one_line(exc)
    if exc.filename is None:
        return code, said
    return code, f"{clipped(os.fsdecode(exc.filename))}: {said}"


def scenario_text(exc: ScenarioError) -> str:
    """An invalid scenario, as `validate` heads its problems: every problem when they
    fit in three lines, else how many there are and the first two."""
    problems = [p.render(exc.file) for p in exc.problems] or [str(exc)]
    if len(problems) < MAX_LINES:
        return "\n".join(["invalid scenario", *problems])
    head = f"invalid scenario ({len(problems)} problems; the first two below"
    if _is_file(exc.file):
        head += f", `errorflow validate --all {clipped(exc.file)}` lists every one"
    return "\n".join([head + ")", *problems[: MAX_LINES - 1]])


def _is_file(name: str) -> bool:
    try:
        return os.path.isfile(name)
    except (OSError, ValueError):
        return False


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


def _one_line(exc: BaseException) -> str:
    """The first line of a message (library messages can run to several)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
