"""Plain-text columns that fit a terminal width by wrapping cells (at spaces and hyphens),
for listings whose first column must never be cut or wrapped: the ids a user copies.

`columns` lays out the whole listing on one line per row when it fits; otherwise each
row's id gets a line of its own and the other columns, wrapped to fit, the lines under
it (indented), under one header.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

from errorflow.core.display import for_terminal

GAP = "  "
INDENT = "  "
MIN_WIDTH = 6  # a column is not wrapped narrower than this (or its longest word)


def wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, break_on_hyphens=True) or [""]


def _min_width(cells: Sequence[str], floor: int) -> int:
    """The narrowest a column gets: its longest unbreakable piece (a hyphen stays with the
    piece before it), and at least `floor`."""
    pieces = [p for cell in cells for word in cell.split() for p in word.replace("-", "- ").split()]
    return max([floor, *(len(p) for p in pieces)])


def fit(natural: Sequence[int], minimum: Sequence[int], available: int) -> list[int]:
    """Column widths summing to at most `available`: the widest column gives up a
    character at a time, none below its minimum (the result may still be too wide)."""
    widths = list(natural)
    while sum(widths) > available:
        shrinkable = [i for i, w in enumerate(widths) if w > minimum[i]]
        if not shrinkable:
            break
        widths[max(shrinkable, key=lambda i: widths[i])] -= 1
    return widths


def _lines(cells: Sequence[str], widths: Sequence[int], right: frozenset[int]) -> list[str]:
    wrapped = [wrap(c, w) for c, w in zip(cells, widths, strict=True)]
    height = max(len(w) for w in wrapped)
    out = []
    for n in range(height):
        parts = []
        for i, (lines, w) in enumerate(zip(wrapped, widths, strict=True)):
            piece = lines[n] if n < len(lines) else ""
            parts.append(piece.rjust(w) if i in right else piece.ljust(w))
        out.append(GAP.join(parts).rstrip())
    return out


def columns(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int,
    right: frozenset[int] = frozenset(),
    floors: Mapping[int, int] | None = None,
) -> list[str]:
    """The lines of a listing whose first column (the id) is never cut; `right` are the
    indices of right-aligned columns (numbers), `floors` the narrowest some columns may
    wrap to (a date that should break at its space, not inside)."""
    # Cells come from the store (labels, names, ids): control characters made visible
    # before anything is measured, so the widths are what the terminal shows.
    table = [[for_terminal(c) for c in r] for r in (headers, *rows)]
    natural = [max(len(r[i]) for r in table) for i in range(len(headers))]
    if sum(natural) + len(GAP) * (len(headers) - 1) <= width:
        lines = [_lines(r, natural, right)[0] for r in table]
        return [lines[0], "─" * len(lines[0]), *lines[1:]]
    # Stacked: the id alone on a line, the other columns fitted under it.
    rest = [[r[i] for i in range(1, len(headers))] for r in table]
    shifted = frozenset(i - 1 for i in right if i > 0)
    available = width - len(INDENT) - len(GAP) * (len(headers) - 2)
    floor = dict(floors or {})
    minimum = [
        _min_width([r[i - 1] for r in rest], floor.get(i, MIN_WIDTH))
        for i in range(1, len(headers))
    ]
    widths = fit(natural[1:], minimum, available)
    head = [INDENT + line for line in _lines(rest[0], widths, shifted)]
    out = [table[0][0], *head, INDENT + "─" * (sum(widths) + len(GAP) * (len(widths) - 1))]
    for row, details in zip(table[1:], rest[1:], strict=True):
        out.append(row[0])
        out.extend(INDENT + line for line in _lines(details, widths, shifted))
    return out
