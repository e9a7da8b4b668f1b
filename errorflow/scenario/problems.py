"""What is wrong with a scenario file, said so a person can act on it.

Every `Problem` renders as one line, `FILE:LINE:COL: PATH: MESSAGE`; a `ScenarioError`
carries every problem found, one a line.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from errorflow.core.errors import MAX_LINES, InputError, clipped

Loc = tuple[int, int]  # 1-based line, column
#: Where a node sits in the file's data: `("agents", "writer", "sends_to", 0)`.
NodePath = tuple[str | int, ...]
Marks = Mapping[NodePath, Loc]

LIMITS_HINT = "see Limits in scenarios/FORMAT.md"


@dataclass
class Problem:
    path: str
    line: int | None
    column: int | None
    message: str

    def render(self, file: str) -> str:
        where = file if self.line is None else f"{file}:{self.line}:{self.column}"
        field = f" {_clipped(self.path)}:" if self.path else ""
        return f"{where}:{field} {self.message}"


#: A field path longer than this (a key of a megabyte) is shown by its start and length.
MAX_SHOWN_PATH = 200


def _clipped(path: str) -> str:
    if len(path) <= MAX_SHOWN_PATH:
        return path
    return f"{path[:60]}... ({len(path):,} characters)"


class ScenarioError(InputError):
    """A scenario file that cannot be used; `str()` lists every problem, one a line."""

    def __init__(self, file: str, problems: list[Problem]) -> None:
        self.file = file
        self.problems = problems
        super().__init__("\n".join(p.render(file) for p in problems))

    @property
    def text(self) -> str:
        """As `validate` heads its problems: every problem when they fit in
        `MAX_LINES`, else how many there are and the first ones."""
        problems = [p.render(self.file) for p in self.problems] or [str(self)]
        if len(problems) < MAX_LINES:
            return "\n".join(["invalid scenario", *problems])
        head = f"invalid scenario ({len(problems)} problems; the first two below"
        if _is_file(self.file):
            head += f", `errorflow validate --all {clipped(self.file)}` lists every one"
        return "\n".join([head + ")", *problems[: MAX_LINES - 1]])


def _is_file(name: str) -> bool:
    try:
        return os.path.isfile(name)
    except (OSError, ValueError):
        return False


def file_error(
    file: str, message: str, line: int | None = None, column: int | None = None
) -> ScenarioError:
    """A problem with the file as a whole (no field path)."""
    return ScenarioError(file, [Problem("", line, column, message)])


def dotted(path: Iterable[str | int]) -> str:
    return ".".join(str(p) for p in path)


def nearest_mark(marks: Marks, path: NodePath) -> Loc | None:
    for cut in range(len(path), -1, -1):
        if path[:cut] in marks:
            return marks[path[:cut]]
    return None


def problem_at(marks: Marks, path: NodePath, message: str) -> Problem:
    """A problem at `path`, pointed at the closest line the file has for it."""
    line, column = nearest_mark(marks, path) or (None, None)
    return Problem(dotted(path), line, column, message)


def by_position(problems: list[Problem]) -> list[Problem]:
    """In file order (a stable sort: problems on one spot keep the order found)."""
    return sorted(problems, key=lambda p: (p.line or 0, p.column or 0))
