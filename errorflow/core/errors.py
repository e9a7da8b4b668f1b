"""The root of errorflow's own exceptions, and what the command line says of one.

Every exception errorflow defines derives from `ErrorflowError` (directly or through a
family's base), so the command line catches one class to end a command with a message
instead of a traceback. An exception keeps its other bases (`ValueError`, `OSError`,
`sqlite3.DatabaseError`...) where code catches it as such, pydantic's validators too.

The contract: `text` is what the command line prints on stderr (by default the first
line of the message, led by `where`, the option or argument at fault, when the user
named one); `exit_code` is what it exits with: `EXIT_FAILURE` for a run that could not
be carried out, `EXIT_USAGE` for bad input (nothing has started, nothing is stored).
"""

from __future__ import annotations

from typing import ClassVar

EXIT_FAILURE, EXIT_USAGE = 1, 2

#: Bad input is said in one to three lines (README, "Commands").
MAX_LINES = 3

#: An option or value a message quotes longer than this is shown by its start and length.
MAX_QUOTED_CHARS = 200


def clipped(text: str) -> str:
    """An option as a message names it (`--db PATH`): whole up to `MAX_QUOTED_CHARS`,
    else its first 60 characters and its length."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)  # one line
    if len(text) <= MAX_QUOTED_CHARS:
        return text
    return f"{text[:60]}... ({len(text):,} characters)"


def first_line(exc: BaseException) -> str:
    """The first line of a message (library messages can run to several)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


class ErrorflowError(Exception):
    """An error errorflow knows: the command line prints `text` and exits with
    `exit_code`. No `__init__` or `__str__` here: a subclass of `OSError` or `ValueError`
    keeps the arguments and the message its builtin base gives it."""

    exit_code: ClassVar[int] = EXIT_FAILURE
    #: The option or argument at fault when the user named it (`--broker`, `--db PATH`).
    where: str = ""

    @property
    def text(self) -> str:
        line = first_line(self)
        return f"{clipped(self.where)}: {line}" if self.where else line


class InputError(ErrorflowError):
    """Bad input: something the user gave (an argument, a scenario, a file, a URL, a
    key, an id) cannot be used. Said before anything starts: nothing is stored."""

    exit_code = EXIT_USAGE
