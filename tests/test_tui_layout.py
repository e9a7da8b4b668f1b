"""The graph's layout and drawing: no box over another, every arrow drawn and followable.

`regions_ok` is the check the snapshot tests run too: the boxes' regions are disjoint,
no arrow runs through a box, two arrows of different sources never run along the same
cells (they may only cross), every arrow ends in its own `▶` on its destination's
left side, and its label sits on its own entry run.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from rich.style import Style

from errorflow.scenario.loader import load
from errorflow.tui.drawing.draw import EdgeLook, NodeLook, draw
from errorflow.tui.drawing.layout import (
    Edge,
    Fit,
    Layout,
    fit_layout,
    fits,
    layers,
    layout,
)
from errorflow.tui.state import RunModel

HERE = Path(__file__).parent / "tui_scenarios"
HORIZONTAL, VERTICAL = 1, 2


def topology(name: str) -> tuple[list[str], list[Edge]]:
    model = RunModel("r", load(HERE / f"{name}.yaml"))
    return list(model.agents), list(model.edges)


def _axes(a: tuple[int, int], b: tuple[int, int]) -> int:
    return HORIZONTAL if a[1] == b[1] else VERTICAL


def route_usage(lay: Layout) -> dict[tuple[int, int], dict[Edge, int]]:
    """Per cell: which arrows use it, and along which axes (bits)."""
    used: dict[tuple[int, int], dict[Edge, int]] = {}
    for edge, route in lay.routes.items():
        cells = route.cells()
        for i, cell in enumerate(cells):
            axes = 0
            for j in (i - 1, i + 1):
                if 0 <= j < len(cells):
                    axes |= _axes(cell, cells[j])
            slot = used.setdefault(cell, {})
            slot[edge] = slot.get(edge, 0) | axes
    return used


def problems(lay: Layout) -> list[str]:
    out = []
    boxes = list(lay.boxes.values())
    for i, a in enumerate(boxes):
        out += [f"{a.name} overlaps {b.name}" for b in boxes[i + 1 :] if a.overlaps(b)]
        if a.x < 0 or a.y < 0 or a.right > lay.width or a.y + a.h > lay.height:
            out.append(f"{a.name} outside the canvas")
    for cell, users in route_usage(lay).items():
        if any(b.holds(*cell) for b in boxes):
            out.append(f"{sorted(users)} run through a box at {cell}")
        by_source: dict[str, int] = {}
        for (src, _), axes in users.items():
            by_source[src] = by_source.get(src, 0) | axes
        # different sources: only a clean crossing (one across, the other along)
        if len(by_source) > 1 and sorted(by_source.values()) != [HORIZONTAL, VERTICAL]:
            out.append(f"{sorted(users)} share {cell}")
    for (a, b), route in lay.routes.items():
        x, y = route.points[-1]
        dst = lay.boxes[b]
        if x != dst.x - 1 or y not in dst.ports:
            out.append(f"{a}→{b} does not end at {b}'s left side")
        if route.points[0] != (lay.boxes[a].right, lay.boxes[a].exit_row):
            out.append(f"{a}→{b} does not start at {a}'s right side")
        if route.label is not None:
            lx, ly = route.label
            entry = {c for c in route.cells() if c[1] == y}
            if any((lx + i, ly) not in entry for i in range(lay.fit.label_w)):
                out.append(f"{a}→{b}'s label is off its entry run")
    return out


def drawn_ok(lay: Layout) -> list[str]:
    """The rendered text: every arrowhead and every box corner where the layout says."""
    lines = draw(lay, {}, {}).plain.split("\n")
    out = []
    for (a, b), route in lay.routes.items():
        x, y = route.points[-1]
        if lines[y][x] != "▶":
            out.append(f"no arrowhead for {a}→{b}")
        for cx, cy in route.cells()[:-1]:
            if lines[cy][cx] not in "─│┌┐└┘├┤┬┴┼":
                out.append(f"{a}→{b} broken at {(cx, cy)}: {lines[cy][cx]!r}")
                break
    for box in lay.boxes.values():
        corners = (lines[box.y][box.x], lines[box.y + box.h - 1][box.right - 1])
        if corners != ("╭", "╯"):
            out.append(f"box {box.name} not drawn whole")
        if box.shown not in lines[box.y]:
            out.append(f"{box.name}'s name missing")
    return out


def random_graph(rng: random.Random) -> tuple[list[str], list[Edge]]:
    n = rng.randint(2, 16)
    nodes = [f"agent_{i}" if rng.random() < 0.5 else f"a{i}" for i in range(n)]
    edges = [(nodes[i], nodes[rng.randrange(i + 1, n)]) for i in range(n - 1)]  # a DAG
    edges += [(nodes[rng.randrange(n)], nodes[rng.randrange(n)]) for _ in range(rng.randint(0, n))]
    return nodes, list(dict.fromkeys(e for e in edges if e[0] != e[1]))


def test_layers_put_every_forward_arrow_rightwards() -> None:
    nodes = ["a", "b", "c", "d"]
    edges = [("a", "c"), ("b", "c"), ("c", "d"), ("a", "d")]
    assert layers(nodes, edges) == {"a": 0, "b": 0, "c": 1, "d": 2}
    # a cycle is cut where the walk from the entry closes it
    assert layers(["a", "b", "c"], [("a", "b"), ("b", "c"), ("c", "b")]) == {
        "a": 0,
        "b": 1,
        "c": 2,
    }


@pytest.mark.parametrize("seed", range(60))
def test_random_graphs_have_no_overlap_and_every_arrow_drawn(seed: int) -> None:
    rng = random.Random(seed)
    nodes, edges = random_graph(rng)
    fit = fits(2, 2)[rng.randrange(len(fits(2, 2)))]
    lay = layout(nodes, edges, fit)
    assert set(lay.routes) == set(edges)
    assert problems(lay) == []
    assert drawn_ok(lay) == []


@pytest.mark.parametrize(
    ("shape", "edges"),
    [
        ("chain", [("a", "b"), ("b", "c"), ("c", "d")]),
        ("fan-in", [("a", "d"), ("b", "d"), ("c", "d")]),
        ("star", [("hub", x) for x in "abcdefgh"]),
        ("tree", [("r", "a"), ("r", "b"), ("a", "c"), ("a", "d"), ("b", "e")]),
        ("cycle", [("a", "b"), ("b", "c"), ("c", "a")]),
        ("send-back", [("r", "w"), ("w", "v"), ("v", "w")]),
    ],
)
def test_shapes_of_real_systems(shape: str, edges: list[Edge]) -> None:
    nodes = list(dict.fromkeys(n for e in edges for n in e))
    lay = layout(nodes, edges)
    assert problems(lay) == [] and drawn_ok(lay) == []
    if shape == "chain":  # a chain is one straight line of boxes
        assert len({b.y for b in lay.boxes.values()}) == 1
        assert all(len(r.points) == 2 for r in lay.routes.values())
    if shape in ("cycle", "send-back"):
        assert sum(r.kind == "back" for r in lay.routes.values()) == 1


@pytest.mark.parametrize("name", ["six", "twelve"])
# The graph's room at 80x24, 160x48 and 200x50 (errorflow.tui.app.graph_room).
@pytest.mark.parametrize("room", [(78, 10), (122, 22), (162, 23)])
def test_bundled_sizes_fit_or_scroll_without_overlap(name: str, room: tuple[int, int]) -> None:
    nodes, edges = topology(name)
    lay = fit_layout(nodes, edges, room, fits(2, 2))
    assert problems(lay) == [] and drawn_ok(lay) == []
    if (name, room) != ("twelve", (78, 10)):  # twelve agents, six columns deep: scrolls
        assert lay.width <= room[0] and lay.height <= room[1], lay.fit
    if room[0] >= 160:  # the room of 200x50 is used: full counts and labels
        assert lay.fit == Fit(gap_y=lay.fit.gap_y)


def test_names_are_cut_to_fit_never_overlapping() -> None:
    nodes = ["a_very_long_agent_name_indeed", "another_rather_long_name", "x"]
    lay = layout(nodes, [(nodes[0], nodes[1]), (nodes[1], nodes[2])], fits(2, 2)[-1])
    assert lay.boxes[nodes[0]].shown == "a_very_…"
    assert problems(lay) == [] and drawn_ok(lay) == []


def test_drawing_colours_the_worst_news_where_arrows_share() -> None:
    lay = layout(["hub", "a", "b"], [("hub", "a"), ("hub", "b")])
    red, green = Style(color="red"), Style(color="green")
    edges = {("hub", "a"): EdgeLook(red, 3), ("hub", "b"): EdgeLook(green, 1)}
    text = draw(lay, {"hub": NodeLook(Style(), ())}, edges)
    exit_x, exit_y = lay.routes[("hub", "a")].points[0]
    line = text.plain.split("\n")[exit_y]
    assert line[exit_x] == "─"
    shared = [s for s in text.spans if s.start <= exit_y * (lay.width + 1) + exit_x < s.end]
    assert shared and shared[-1].style == red
