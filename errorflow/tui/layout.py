"""Layered layout of the agent graph and its drawing as styled text (pure, no Textual).

Agents go into columns by their longest path from an entry agent (cycles cut), so
every forward arrow points right. Arrows are routed orthogonally through the gutter
right of their source column; each cell remembers which directions pass through it,
so merging and splitting arrows draw proper junctions (┬ ┤ ┼) instead of
overwriting each other. Boxes are drawn last: a box is never crossed out by a line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text

BOX_H = 4
GAP_X = 4
GAP_Y = 1
MIN_INNER = 12  # "contaminated" fits
MAX_INNER = 16

# Direction bits of a line cell.
N, E, S, W = 1, 2, 4, 8
JUNCTIONS = {
    E | W: "─", N | S: "│", E | S: "┌", W | S: "┐", N | E: "└", N | W: "┘",
    N | S | E: "├", N | S | W: "┤", E | W | S: "┬", E | W | N: "┴", N | E | S | W: "┼",
    E: "─", W: "─", N: "│", S: "│",
}  # fmt: skip


@dataclass(frozen=True)
class Box:
    name: str
    x: int
    y: int
    w: int
    h: int = BOX_H

    @property
    def mid(self) -> int:
        return self.y + self.h // 2


@dataclass(frozen=True)
class Layout:
    boxes: dict[str, Box]
    edges: list[tuple[str, str]]
    width: int
    height: int


def layers(nodes: list[str], edges: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Column of each node: the longest path from a node nobody sends to."""
    out: dict[str, list[str]] = {n: [] for n in nodes}
    indeg = dict.fromkeys(nodes, 0)
    for a, b in edges:
        if a in out and b in out:
            out[a].append(b)
            indeg[b] += 1
    layer = dict.fromkeys(nodes, 0)

    def visit(node: str, depth: int, path: frozenset[str]) -> None:
        if depth < layer[node] or (depth and node in path):
            return
        layer[node] = depth
        for nxt in out[node]:
            if nxt not in path:
                visit(nxt, depth + 1, path | {node})

    for root in [n for n in nodes if indeg[n] == 0] or nodes[:1]:
        visit(root, 0, frozenset())
    return layer


def layout(nodes: list[str], edges: list[tuple[str, str]]) -> Layout:
    inner = max(MIN_INNER, min(MAX_INNER, max((len(n) for n in nodes), default=0)))
    w = inner + 2
    col = layers(nodes, edges)
    columns: dict[int, list[str]] = {}
    for n in nodes:
        columns.setdefault(col[n], []).append(n)
    tallest = max((len(c) for c in columns.values()), default=0)
    height = max(0, tallest * (BOX_H + GAP_Y) - GAP_Y)
    boxes: dict[str, Box] = {}
    for c, members in columns.items():
        used = len(members) * (BOX_H + GAP_Y) - GAP_Y
        top = (height - used) // 2  # centre short columns against the tallest
        for i, n in enumerate(members):
            boxes[n] = Box(n, c * (w + GAP_X), top + i * (BOX_H + GAP_Y), w)
    n_cols = max(columns, default=-1) + 1
    width = max(0, n_cols * (w + GAP_X) - GAP_X)
    back = sum(1 for a, b in edges if a in boxes and b in boxes and col[b] <= col[a])
    return Layout(boxes, [e for e in edges if e[0] in boxes and e[1] in boxes], width,
                  height + (back + 1 if back else 0))  # fmt: skip


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

    def text(self, x: int, y: int, s: str, style: Style | None) -> None:
        for i, ch in enumerate(s):
            self.put(x + i, y, ch, style)

    def line(self, x: int, y: int, bits: int, style: Style, rank: int) -> None:
        if not (0 <= x < self.width and 0 <= y < self.height):
            return
        self.bits[y][x] |= bits
        self.chars[y][x] = JUNCTIONS.get(self.bits[y][x], "┼")
        if rank >= self.rank[y][x]:  # shared segments take the worst colour
            self.rank[y][x], self.styles[y][x] = rank, style

    def hline(self, x0: int, x1: int, y: int, style: Style, rank: int) -> None:
        lo, hi = min(x0, x1), max(x0, x1)
        for x in range(lo, hi + 1):
            self.line(x, y, (E if x < hi else 0) | (W if x > lo else 0), style, rank)

    def vline(self, x: int, y0: int, y1: int, style: Style, rank: int) -> None:
        lo, hi = min(y0, y1), max(y0, y1)
        for y in range(lo, hi + 1):
            self.line(x, y, (S if y < hi else 0) | (N if y > lo else 0), style, rank)

    def render(self) -> Text:
        out = Text(no_wrap=True, overflow="crop")
        for y in range(self.height):
            if y:
                out.append("\n")
            for x in range(self.width):
                out.append(self.chars[y][x], self.styles[y][x] or "")
        return out


@dataclass(frozen=True)
class NodeLook:
    style: Style
    status: str  # the second line of the box, e.g. "✗ contaminated"


@dataclass(frozen=True)
class EdgeLook:
    style: Style
    rank: int  # higher wins where arrows share cells
    pulse: bool = False  # a message travelled this arrow in the latest batch


def draw(
    lay: Layout, nodes: Mapping[str, NodeLook], edges: Mapping[tuple[str, str], EdgeLook]
) -> Text:
    canvas = Canvas(lay.width, lay.height)
    default = EdgeLook(Style(dim=True), 0)
    back_row = max((b.y + b.h for b in lay.boxes.values()), default=0)
    for a, b in sorted(lay.edges, key=lambda e: edges.get(e, default).rank):
        src, dst = lay.boxes[a], lay.boxes[b]
        look = edges.get((a, b), default)
        if dst.x > src.x:
            gx = src.x + src.w + GAP_X // 2 - 1
            canvas.hline(src.x + src.w, gx, src.mid, look.style, look.rank)
            canvas.vline(gx, src.mid, dst.mid, look.style, look.rank)
            canvas.hline(gx, dst.x - 1, dst.mid, look.style, look.rank)
            # Arrows that skip a column run through its row; boxes are drawn over them.
            canvas.put(dst.x - 1, dst.mid, "▶", look.style)
            if look.pulse:
                canvas.put((gx + dst.x - 1) // 2, dst.mid, "●", look.style)
        else:  # a backward arrow (a cycle): under all the boxes
            back_row += 1
            sx, dx = src.x + src.w // 2 + 1, dst.x + dst.w // 2 - 1
            canvas.vline(sx, src.y + src.h, back_row, look.style, look.rank)
            canvas.hline(sx, dx, back_row, look.style, look.rank)
            canvas.vline(dx, back_row, dst.y + dst.h, look.style, look.rank)
            canvas.put(dx, dst.y + dst.h, "▲", look.style)
    for name, box in lay.boxes.items():
        node = nodes.get(name, NodeLook(Style(dim=True), "idle"))
        inner = box.w - 2
        canvas.text(box.x, box.y, "╭" + "─" * inner + "╮", node.style)
        for row in range(1, box.h - 1):
            canvas.text(box.x, box.y + row, "│" + " " * inner + "│", node.style)
        canvas.text(box.x, box.y + box.h - 1, "╰" + "─" * inner + "╯", node.style)
        label = name if len(name) <= inner else name[: inner - 1] + "…"
        canvas.text(box.x + 1 + (inner - len(label)) // 2, box.y + 1, label,
                    node.style + Style(bold=True))  # fmt: skip
        # "✗ contaminated" is 14 wide; a narrow box keeps the word and drops the glyph.
        status = node.status if len(node.status) <= inner else node.status.split(" ")[-1]
        status = status[:inner]
        canvas.text(box.x + 1 + (inner - len(status)) // 2, box.y + 2, status, node.style)
    return canvas.render()
