"""Where the commands write: results on stdout, progress and errors on stderr."""

from __future__ import annotations

import os

from rich.console import Console, ConsoleDimensions
from rich.text import Text

from errorflow.core.display import for_terminal

#: The width of output that goes to a pipe or a file: a program or a pager reads it, not a
#: terminal, so a table keeps each row on one line (rich would wrap at 80). COLUMNS, when
#: set, still decides.
PIPED_WIDTH = 240


class _Console(Console):
    @property
    def size(self) -> ConsoleDimensions:
        dims = super().size
        if self._width is None and "COLUMNS" not in os.environ and not self.is_terminal:
            return ConsoleDimensions(PIPED_WIDTH, dims.height)
        return dims

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]

    def on_broken_pipe(self) -> None:
        """The reader went away (`| head`): stop writing, and let the command line end
        quietly as for any other closed pipe (rich would exit with code 1 here)."""
        self.quiet = True
        raise BrokenPipeError


out = _Console()
err = _Console(stderr=True)


def fail(message: str, code: int) -> int:
    """One plain message on stderr (user text is never read as rich markup, and its
    control characters are shown, not sent to the terminal)."""
    shown = for_terminal(message, multiline=True, limit=None)
    err.print(Text("error", style="red") + Text(f": {shown}"), highlight=False, soft_wrap=True)
    return code


def say(message: str) -> None:
    """One plain line of progress or advice on stderr (never wrapped: it may hold a
    command or a path to copy)."""
    err.print(
        Text(for_terminal(message, multiline=True, limit=None)), highlight=False, soft_wrap=True
    )
