"""Layered layout of the agent graph (pure, no Textual): boxes in columns, arrows routed
orthogonally between them, never through a box and never along another source's arrow.

Theory of operation
-------------------
* Columns: the longest path from an entry agent, once the edges that close a cycle (a
  reviewer's send-back) are set aside, so every forward arrow points right. Within a
  column, agents are ordered by the mean position of what sends to them (fewer
  crossings).
* Every arrow leaves its source on the right (the box's middle row) into the gutter
  right of the source's column, runs along a vertical *track* of that gutter, and
  enters its destination on the left at a *port*: a row of the box's left side that is
  its own (a box with more inputs is taller). An arrow to the next column needs nothing
  more. One that skips columns runs along a row of its own above all the boxes, a
  backward one (a cycle, a send-back) along one below them, and then down (up) a track
  of the gutter left of its destination.
* Sharing: the arrows of one source share its exit and its track (a fan-out); anything
  else only crosses. Vertical runs of different owners never share a track where they
  overlap, and no port sits on a row where another source's exit runs (the box grows
  instead), so every arrow can be followed and the label on its entry run is its own.
* Fit: `fit_layout` tries ways of drawing from the most generous (gaps, full counts and
  labels) to the most compact (short counts and labels, cut names) and takes the first
  that fits the room; if none does, the most generous that fits one way (the panel
  scrolls the other).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from errorflow.core.display import for_terminal

Edge = tuple[str, str]
Point = tuple[int, int]
Variant = Literal["full", "mid", "short", "none"]
RouteKind = Literal["next", "skip", "back"]

#: Tries at growing a box by a row until every port has a row of its own.
MAX_GROW = 200


@dataclass(frozen=True)
class Fit:
    """One way of drawing: gaps between boxes, how much the counts and labels say."""

    gap_y: int = 1
    counts: Variant = "full"  # in a box: ✓clean ◐contained ✗contaminated
    label: Variant = "full"  # on an arrow: messages ◐contained ✗contaminated
    name_max: int = 16
    digits: int = 2  # of the largest count a box shows
    label_digits: int = 2  # of the largest count an arrow shows

    @property
    def counts_w(self) -> int:
        return _variant_width(self.counts, self.digits, total=False)

    @property
    def label_w(self) -> int:
        return _variant_width(self.label, self.label_digits, total=True)


def _variant_width(variant: Variant, d: int, *, total: bool) -> int:
    """A box: `✓12 ◐12 ✗12`, `◐12 ✗12`, `✗12`; an arrow: `12 ◐12 ✗12`, `12 ✗12`,
    `✗12` (messages first); or nothing."""
    one = 1 + d
    if variant == "full":
        return (d if total else one) + 2 * one + 2
    if variant == "mid":
        return (d + 1 + one) if total else 2 * one + 1
    return one if variant == "short" else 0


def fits(digits: int, label_digits: int) -> list[Fit]:
    """The ways of drawing, most generous first."""
    d, ld = digits, label_digits
    ways: list[tuple[int, Variant, Variant, int]] = [
        (1, "full", "full", 16),
        (0, "full", "full", 16),
        (1, "mid", "mid", 16),
        (0, "mid", "mid", 16),
        (0, "mid", "short", 16),
        (0, "short", "short", 12),
        (0, "short", "short", 8),
    ]
    return [Fit(g, c, lb, n, d, ld) for g, c, lb, n in ways]


@dataclass(frozen=True)
class Box:
    name: str
    x: int
    y: int
    w: int
    h: int
    shown: str = ""  # the name as drawn (cut to fit)

    @property
    def right(self) -> int:
        return self.x + self.w

    @property
    def exit_row(self) -> int:
        return self.y + self.h // 2

    @property
    def ports(self) -> range:
        """Rows an arrow may enter at (a box's corners are not)."""
        return range(self.y + 1, self.y + self.h - 1)

    def overlaps(self, other: Box) -> bool:
        return (self.x < other.right and other.x < self.right
                and self.y < other.y + other.h and other.y < self.y + self.h)  # fmt: skip

    def holds(self, x: int, y: int) -> bool:
        return self.x <= x < self.right and self.y <= y < self.y + self.h


@dataclass(frozen=True)
class Route:
    edge: Edge
    kind: RouteKind
    points: tuple[Point, ...]  # corners, from the cell right of the source to the arrowhead
    label: Point | None = None  # where the arrow's label starts (on its entry run)

    def cells(self) -> list[Point]:
        """Every cell of the route in order, the arrowhead last."""
        out = [self.points[0]]
        for (x0, y0), (x1, y1) in zip(self.points, self.points[1:], strict=False):
            dx, dy = (x1 > x0) - (x1 < x0), (y1 > y0) - (y1 < y0)
            x, y = x0, y0
            while (x, y) != (x1, y1):
                x, y = x + dx, y + dy
                out.append((x, y))
        return out


@dataclass(frozen=True)
class Layout:
    boxes: dict[str, Box]
    routes: dict[Edge, Route]
    width: int
    height: int
    fit: Fit = field(default_factory=Fit)

    @property
    def edges(self) -> list[Edge]:
        return list(self.routes)


# -- columns -------------------------------------------------------------------------------


def layers(nodes: Sequence[str], edges: Iterable[Edge]) -> dict[str, int]:
    """Column of each node: its longest path from a node nobody sends to, over the
    edges left once those closing a cycle are set aside."""
    forward = _acyclic(nodes, edges)
    indeg = dict.fromkeys(nodes, 0)
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in forward:
        succ[a].append(b)
        indeg[b] += 1
    layer = dict.fromkeys(nodes, 0)
    ready = [n for n in nodes if indeg[n] == 0]
    while ready:
        node = ready.pop(0)
        for nxt in succ[node]:
            layer[nxt] = max(layer[nxt], layer[node] + 1)
            indeg[nxt] -= 1
            if indeg[nxt] == 0:
                ready.append(nxt)
    return layer


def _acyclic(nodes: Sequence[str], edges: Iterable[Edge]) -> list[Edge]:
    """The edges without those a depth-first walk from the entry nodes finds closing a
    cycle (the walk starts where nobody sends to; what it misses, in node order)."""
    known = set(nodes)
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    listed = [(a, b) for a, b in dict.fromkeys(edges) if a in known and b in known and a != b]
    for a, b in listed:
        succ[a].append(b)
    has_in = {b for _, b in listed}
    state: dict[str, int] = {}  # 1 on the walk's path, 2 done
    closing: set[Edge] = set()

    def walk(node: str) -> None:
        state[node] = 1
        for nxt in succ[node]:
            if state.get(nxt) == 1:
                closing.add((node, nxt))
            elif nxt not in state:
                walk(nxt)
        state[node] = 2

    for root in [n for n in nodes if n not in has_in] + list(nodes):
        if root not in state:
            walk(root)
    return [e for e in listed if e not in closing]


def _order(nodes: Sequence[str], layer: dict[str, int], forward: list[Edge]) -> list[list[str]]:
    """Nodes by column, each column ordered by the mean position of its senders."""
    cols: list[list[str]] = [[] for _ in range(max(layer.values(), default=-1) + 1)]
    for n in nodes:
        cols[layer[n]].append(n)
    preds: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in forward:
        preds[b].append(a)
    for _ in range(2):
        pos = {n: (i + 0.5) / len(col) for col in cols for i, n in enumerate(col)}
        for col in cols[1:]:
            col.sort(key=lambda n: sum(pos[p] for p in preds[n]) / len(preds[n])
                     if preds[n] else pos[n])  # fmt: skip
            pos.update({n: (i + 0.5) / len(col) for i, n in enumerate(col)})
    return cols


# -- placing and routing ---------------------------------------------------------------------


def shorten(name: str, limit: int) -> str:
    shown = for_terminal(name)  # a name from the bus may carry escape sequences
    return shown if len(shown) <= limit else shown[: max(1, limit - 1)] + "…"


def layout(nodes: Sequence[str], edges: Iterable[Edge], fit: Fit | None = None) -> Layout:
    fit = fit or Fit()
    nodes = list(dict.fromkeys(nodes))
    known = set(nodes)
    edges = [(a, b) for a, b in dict.fromkeys(edges) if a in known and b in known and a != b]
    layer = layers(nodes, edges)
    cols = _order(nodes, layer, _acyclic(nodes, edges))
    grow = dict.fromkeys(nodes, 0)
    for _ in range(MAX_GROW):
        placed = _Placement(nodes, edges, layer, cols, fit, grow).run()
        if isinstance(placed, Layout):
            return placed
        grow[placed] += 1  # a box that needs one more row for its ports
    raise RuntimeError("graph layout did not settle")  # pragma: no cover


def fit_layout(
    nodes: Sequence[str], edges: Iterable[Edge], room: tuple[int, int], ways: Sequence[Fit]
) -> Layout:
    """The first way that fits `room` (columns, rows); else the first that fits its
    width (the panel scrolls down), else its height, else the most compact."""
    edges = list(edges)
    tried = [layout(nodes, edges, way) for way in ways]
    width, height = room
    wide = [lay.width <= width for lay in tried]
    tall = [lay.height <= height for lay in tried]
    for ok in ([w and t for w, t in zip(wide, tall, strict=True)], wide, tall):
        if any(ok):
            return tried[ok.index(True)]
    return tried[-1]


class _Placement:
    """One attempt at a layout with the boxes grown by `grow` rows: a `Layout`, or the
    name of a box that has too few rows for its ports."""

    def __init__(
        self, nodes: list[str], edges: list[Edge], layer: dict[str, int],
        cols: list[list[str]], fit: Fit, grow: dict[str, int],
    ) -> None:  # fmt: skip
        self.nodes, self.edges, self.layer, self.cols, self.fit = nodes, edges, layer, cols, fit
        self.grow = grow
        self.kind: dict[Edge, RouteKind] = {}
        for a, b in edges:
            step = layer[b] - layer[a]
            self.kind[(a, b)] = "next" if step == 1 else ("skip" if step > 1 else "back")
        self.index = {n: i for col in cols for i, n in enumerate(col)}
        self.outs: dict[str, list[Edge]] = {n: [] for n in nodes}
        self.ins: dict[str, list[Edge]] = {n: [] for n in nodes}
        order = {"skip": 0, "next": 1, "back": 2}  # arrows from above first, below last
        for e in sorted(edges, key=lambda e: (order[self.kind[e]], self.index[e[0]])):
            self.outs[e[0]].append(e)
            self.ins[e[1]].append(e)

    def run(self) -> Layout | str:
        boxes = self._boxes()
        ports = self._ports(boxes)
        if isinstance(ports, str):
            return ports
        channels = self._channels(boxes)
        tracks, counts = self._tracks(boxes, ports, channels)
        return self._finish(boxes, ports, channels, tracks, counts)

    # vertical placement (x comes once the gutters' widths are known)
    def _size(self, n: str) -> tuple[int, int, str]:
        fit = self.fit
        shown = shorten(n, fit.name_max)
        height = max(3, len(self.ins[n]) + 2) + self.grow[n]  # a row per port
        return max(len(shown), fit.counts_w) + 2, height, shown

    def _boxes(self) -> dict[str, Box]:
        sizes = {n: self._size(n) for n in self.nodes}
        gap = self.fit.gap_y
        heights = [sum(sizes[n][1] for n in col) + gap * (len(col) - 1) for col in self.cols]
        tallest = max(heights, default=0)
        top = sum(1 for k in self.kind.values() if k == "skip")
        boxes: dict[str, Box] = {}
        for col, height in zip(self.cols, heights, strict=True):
            y = top + (tallest - height) // 2
            for n in col:
                w, h, shown = sizes[n]
                boxes[n] = Box(n, 0, y, w, h, shown)
                y += h + gap
        self.box_rows = tallest
        return boxes

    def _ports(self, boxes: dict[str, Box]) -> dict[Edge, int] | str:
        ports: dict[Edge, int] = {}
        for col_no, col in enumerate(self.cols):
            senders = self.cols[col_no - 1] if col_no else []
            exits = {boxes[s].exit_row: s for s in senders if self.outs[s]}
            for n in col:
                got = _assign(boxes[n].ports, self.ins[n], exits, boxes)
                if got is None:
                    return n
                ports.update(got)
        return ports

    def _channels(self, boxes: dict[str, Box]) -> dict[Edge, int]:
        """The row of each skip arrow above the boxes, of each back arrow below them;
        the shortest nearest the boxes."""
        span = {e: abs(self.layer[e[1]] - self.layer[e[0]]) for e in self.edges}
        skips = sorted((e for e in self.edges if self.kind[e] == "skip"), key=lambda e: span[e])
        backs = sorted((e for e in self.edges if self.kind[e] == "back"), key=lambda e: span[e])
        top = len(skips)
        rows = {e: top - 1 - i for i, e in enumerate(skips)}
        rows.update({e: top + self.box_rows + i for i, e in enumerate(backs)})
        return rows

    def _tracks(self, boxes: dict[str, Box], ports: dict[Edge, int],
                channels: dict[Edge, int]) -> tuple[dict[object, int], dict[int, int]]:  # fmt: skip
        """A track per vertical run, by gutter; runs of different owners that overlap
        never share one. (The track of each owner, the number of tracks per gutter.)"""
        runs: dict[int, list[tuple[int, int, object]]] = {}
        for a in self.nodes:
            if not self.outs[a]:
                continue
            rows = [boxes[a].exit_row]
            rows += [ports[e] if self.kind[e] == "next" else channels[e] for e in self.outs[a]]
            runs.setdefault(self.layer[a], []).append((min(rows), max(rows), ("out", a)))
        for e in self.edges:
            if self.kind[e] != "next":
                lo, hi = sorted((channels[e], ports[e]))
                runs.setdefault(self.layer[e[1]] - 1, []).append((lo, hi, ("in", e)))
        track: dict[object, int] = {}
        counts: dict[int, int] = {}
        for gutter, found in runs.items():
            ends: list[int] = []  # the lowest row used on each track so far
            for lo, hi, owner in sorted(found, key=lambda r: (r[0], r[1])):
                free = next((t for t, end in enumerate(ends) if end < lo), None)
                if free is None:
                    free = len(ends)
                    ends.append(hi)
                ends[free] = hi
                track[owner] = free
            counts[gutter] = len(ends)
        return track, counts

    def _finish(self, boxes: dict[str, Box], ports: dict[Edge, int], channels: dict[Edge, int],
                tracks: dict[object, int], counts: dict[int, int]) -> Layout:  # fmt: skip
        n_cols = len(self.cols)
        entry = self.fit.label_w + 3 if self.fit.label_w else 2  # line, label, line, arrow
        gutter_w = {g: 1 + counts.get(g, 0) + (entry if g + 1 < n_cols else 0)
                    for g in range(n_cols)}  # fmt: skip
        gutter_w[n_cols - 1] = 1 + counts[n_cols - 1] if counts.get(n_cols - 1) else 0
        gutter_w[-1] = 1 + counts[-1] + entry if counts.get(-1) else 0
        gx, col_x = {-1: 0}, {}
        x = gutter_w[-1]
        for c, col in enumerate(self.cols):
            col_x[c] = x
            x += max(boxes[n].w for n in col)
            gx[c] = x
            x += gutter_w[c]
        placed = {n: _moved(b, col_x[self.layer[n]]) for n, b in boxes.items()}

        def track_x(gutter: int, owner: object) -> int:
            return gx[gutter] + 1 + tracks[owner]

        routes: dict[Edge, Route] = {}
        for e in self.edges:
            a, b = e
            src, g_in = placed[a], self.layer[b] - 1
            ta, q, arrow = track_x(self.layer[a], ("out", a)), ports[e], col_x[g_in + 1] - 1
            pts: list[Point] = [(src.right, src.exit_row), (ta, src.exit_row)]
            if self.kind[e] != "next":
                te, ch = track_x(g_in, ("in", e)), channels[e]
                pts += [(ta, ch), (te, ch), (te, q)]
            else:
                pts.append((ta, q))
            pts.append((arrow, q))
            label = (gx[g_in] + 2 + counts.get(g_in, 0), q) if self.fit.label_w else None
            routes[e] = Route(e, self.kind[e], _corners(pts), label)
        height = max((c + 1 for c in channels.values()), default=0)
        height = max(height, max((b.y + b.h for b in placed.values()), default=0))
        return Layout(placed, routes, x, height, self.fit)


def _moved(box: Box, x: int) -> Box:
    return Box(box.name, x, box.y, box.w, box.h, box.shown)


def _corners(points: list[Point]) -> tuple[Point, ...]:
    """The points without repeats and without the middle of three in a line."""
    out: list[Point] = []
    for p in points:
        if out and out[-1] == p:
            continue
        if len(out) >= 2 and _in_line(out[-2], out[-1], p):
            out[-1] = p
            continue
        out.append(p)
    return tuple(out)


def _in_line(a: Point, b: Point, c: Point) -> bool:
    return (a[0] == b[0] == c[0]) or (a[1] == b[1] == c[1])


def _assign(rows: range, ins: list[Edge], exits: dict[int, str],
            boxes: dict[str, Box]) -> dict[Edge, int] | None:  # fmt: skip
    """A row of `rows` for each incoming arrow, none on a row where another source's
    exit runs; an arrow from the next column left goes straight across when it can.
    None: too few rows."""
    taken: dict[Edge, int] = {}
    used: set[int] = set()

    def allowed(row: int, e: Edge) -> bool:
        return row not in used and exits.get(row, e[0]) == e[0]

    for e in ins:  # straight lines first
        row = boxes[e[0]].exit_row
        if exits.get(row) == e[0] and row in rows and allowed(row, e):
            taken[e] = row
            used.add(row)
    last = rows.start - 1
    for e in ins:
        if e in taken:
            last = max(last, taken[e])
            continue
        free = [r for r in rows if allowed(r, e)]
        if not free:
            return None
        row = next((r for r in free if r > last), free[0])
        taken[e] = row
        used.add(row)
        last = max(last, row)
    return taken
