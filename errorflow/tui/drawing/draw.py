"""Drawing a `Layout` as styled text (pure, no Textual): lines, arrowheads, labels, boxes.

Each cell remembers which directions pass through it, so a fan-out splits with proper
junctions (├ ┬) and crossing arrows cross (┼) instead of overwriting each other; where
arrows share cells, the worst news shows (`EdgeLook.rank`). Labels and boxes are drawn
last: the layout keeps arrows out of both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text

from errorflow.tui.drawing.layout import (
    Box,
    Edge,
    Layout,
    Route,
)

# Direction bits of a line cell.
N, E, S, W = 1, 2, 4, 8
JUNCTIONS = {
    E | W: "─", N | S: "│", E | S: "┌", W | S: "┐", N | E: "└", N | W: "┘",
    N | S | E: "├", N | S | W: "┤", E | W | S: "┬", E | W | N: "┴", N | E | S | W: "┼",
    E: "─", W: "─", N: "│", S: "│",
}  # fmt: skip
DIM = Style(dim=True)

#: Styled text as runs: a box's counts, an arrow's label.
Pieces = tuple[tuple[str, Style], ...]


@dataclass(frozen=True)
class NodeLook:
    border: Style  # the box and its name
    counts: tuple[Pieces, ...]  # a row each, the first of the layout's counts width
    mark: Pieces = ()  # on the bottom border: failures start here


@dataclass(frozen=True)
class EdgeLook:
    style: Style
    rank: int = 0  # higher wins where arrows share cells
    label: Pieces = ()  # exactly the layout's label width
    dot: float | None = None  # 0..1: where along the arrow a message is travelling


class Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.chars = [[" "] * width for _ in range(height)]
        self.styles: list[list[Style | None]] = [[None] * width for _ in range(height)]
        self.bits = [[0] * width for _ in range(height)]
        self.rank = [[-1] * width for _ in range(height)]

    def put(self, x: int, y: int, ch: str, style: Style | None) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            self.chars[y][x], self.styles[y][x] = ch, style

    def text(self, x: int, y: int, text: str, style: Style | None = None) -> None:
        for i, ch in enumerate(text):
            self.put(x + i, y, ch, style)

    def pieces(self, x: int, y: int, pieces: Pieces, limit: int = 10_000) -> None:
        for text, style in pieces:
            text = text[:limit]
            self.text(x, y, text, style)
            x, limit = x + len(text), limit - len(text)

    def line(self, x: int, y: int, bits: int, style: Style, rank: int) -> None:
        if not (0 <= x < self.width and 0 <= y < self.height):
            return
        self.bits[y][x] |= bits
        self.chars[y][x] = JUNCTIONS.get(self.bits[y][x], "┼")
        if rank >= self.rank[y][x]:  # shared cells take the worst colour
            self.rank[y][x], self.styles[y][x] = rank, style

    def route(self, route: Route, style: Style, rank: int) -> None:
        cells = route.cells()
        for i, (x, y) in enumerate(cells):
            bits = 0
            for j in (i - 1, i + 1):
                if 0 <= j < len(cells):
                    bits |= _towards((x, y), cells[j])
            self.line(x, y, bits, style, rank)

    def render(self) -> Text:
        out = Text(no_wrap=True, overflow="crop", end="")
        for y in range(self.height):
            if y:
                out.append("\n")
            run, style = "", self.styles[y][0] if self.width else None
            for x in range(self.width):  # one span per run of a style, not per cell
                if self.styles[y][x] != style:
                    out.append(run, style or "")
                    run, style = "", self.styles[y][x]
                run += self.chars[y][x]
            out.append(run, style or "")
        return out


def _towards(a: tuple[int, int], b: tuple[int, int]) -> int:
    dx, dy = b[0] - a[0], b[1] - a[1]
    return (E if dx > 0 else W if dx < 0 else 0) | (S if dy > 0 else N if dy < 0 else 0)


def _free_cells(route: Route, label_w: int) -> list[tuple[int, int]]:
    """The cells a travelling `●` may take: the route's, less its label and arrowhead."""
    cells = route.cells()[:-1]
    if route.label is None or not label_w:
        return cells
    x0, y0 = route.label
    return [(x, y) for x, y in cells if not (y == y0 and x0 <= x < x0 + label_w)]


def draw(lay: Layout, nodes: Mapping[str, NodeLook], edges: Mapping[Edge, EdgeLook]) -> Text:
    canvas = Canvas(lay.width, lay.height)
    default = EdgeLook(DIM)
    ordered = sorted(lay.routes.values(), key=lambda r: edges.get(r.edge, default).rank)
    for route in ordered:
        look = edges.get(route.edge, default)
        canvas.route(route, look.style, look.rank)
    for route in ordered:  # arrowheads, labels and travelling dots over every line
        look = edges.get(route.edge, default)
        x, y = route.points[-1]
        canvas.put(x, y, "▶", look.style)
        if look.label and route.label is not None:
            canvas.pieces(route.label[0], route.label[1], look.label)
        if look.dot is not None:
            cells = _free_cells(route, sum(len(t) for t, _ in look.label))
            if cells:
                dx, dy = cells[min(len(cells) - 1, int(look.dot * len(cells)))]
                canvas.put(dx, dy, "●", look.style + Style(bold=True))
    for name, box in lay.boxes.items():
        _box(canvas, box, nodes.get(name, NodeLook(DIM, ())))
    return canvas.render()


def _box(canvas: Canvas, box: Box, look: NodeLook) -> None:
    bold = look.border + Style(bold=True)
    inner = box.w - 2
    canvas.text(box.x, box.y, "╭" + "─" * inner + "╮", look.border)
    canvas.text(box.x + 1 + (1 if len(box.shown) < inner else 0), box.y, box.shown, bold)
    for row in range(1, box.h - 1):
        canvas.text(box.x, box.y + row, "│" + " " * inner + "│", look.border)
    for row, pieces in enumerate(look.counts[: box.h - 2]):
        canvas.pieces(box.x + 1, box.y + 1 + row, pieces, inner)
    canvas.text(box.x, box.y + box.h - 1, "╰" + "─" * inner + "╯", look.border)
    canvas.pieces(box.x + 1, box.y + box.h - 1, look.mark, inner)
