"""Where the commands write: results on stdout, progress and errors on stderr."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

out = Console()
err = Console(stderr=True)


def fail(message: str, code: int) -> int:
    """One plain message on stderr (user text is never read as rich markup)."""
    err.print(Text("error", style="red") + Text(f": {message}"), highlight=False, soft_wrap=True)
    return code
