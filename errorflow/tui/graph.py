"""The agent graph widget: the topology as boxes and arrows, and what has travelled it.

A box counts its agent's verdicts over the trials so far (✓ clean, ◐ contained,
✗ contaminated) and, on its bottom border, how many of its results carried a failure
that started there (its own tool calls failed: `!`). An arrow says how many messages
crossed it and how many of them were contained or contaminated. While a message
travels an arrow (`PULSE_TICKS` UI ticks), the arrow and its sender light up in the
colour of the message's label and a `●` runs along it: red where contamination
travels on, amber where it was stopped. Between messages everything is drawn dim, in
the colour of what mostly crossed it.
"""

from __future__ import annotations

from rich.style import Style
from textual.geometry import Region

from errorflow.scoring.score import Label
from errorflow.tui.drawing.draw import (
    EdgeLook,
    NodeLook,
    Pieces,
    draw,
)
from errorflow.tui.drawing.flow import (
    AgentState,
    AgentView,
    EdgeKind,
    EdgeView,
)
from errorflow.tui.drawing.layout import (
    Box,
    Fit,
    Layout,
    Variant,
    fit_layout,
    fits,
)
from errorflow.tui.palette import (
    GREEN,
    GREY,
    LABEL_RANK,
    LABEL_STATE,
    RED,
    STATE_STYLE,
    YELLOW,
)
from errorflow.tui.state import RunModel
from errorflow.tui.view import View

#: How many UI ticks a message takes to travel an arrow (its light and its `●`).
PULSE_TICKS = 8
#: Arrows that carried something, between messages.
QUIET = Style(dim=True)
WORKING = Style(color="#61afef")
COUNT_LOOK: tuple[tuple[Label, str, str], ...] = (
    (Label.CLEAN, "✓", GREEN), (Label.CONTAINED, "◐", YELLOW), (Label.CONTAMINATED, "✗", RED),
)  # fmt: skip
#: What a box shows in its first row per variant; a taller box lists the rest below.
SHOWN: dict[Variant, tuple[Label, ...]] = {
    "full": (Label.CLEAN, Label.CONTAINED, Label.CONTAMINATED),
    "mid": (Label.CONTAINED, Label.CONTAMINATED),
    "short": (Label.CONTAMINATED,),
    "none": (),
}


def counts_pieces(counts: dict[Label, int], labels: tuple[Label, ...], digits: int) -> Pieces:
    """`✓3  ◐12 ✗0 ` with every number in a field of `digits`: widths never jitter."""
    out: list[tuple[str, Style]] = []
    for label, glyph, colour in COUNT_LOOK:
        if label not in labels:
            continue
        n = counts.get(label, 0)
        style = Style(color=colour, bold=label is Label.CONTAMINATED) if n else QUIET
        out += [(" " if out else "", Style()), (f"{glyph}{n:<{digits}}", style)]
    return tuple(out)


def count_rows(counts: dict[Label, int], fit: Fit, rows: int) -> tuple[Pieces, ...]:
    """The box's counts: the fit's in the first row, in a taller box the rest below
    (a fan-in's box has the rows)."""
    first = SHOWN[fit.counts]
    rest = [lb for lb in (Label.CONTAINED, Label.CLEAN) if lb not in first]
    out = [counts_pieces(counts, first, fit.digits)]
    for label in rest[: max(0, rows - 1)]:
        out.append(counts_pieces(counts, (label,), fit.digits))
    return tuple(out)


def label_pieces(edge: EdgeView, fit: Fit) -> Pieces:
    """An arrow's label: `12 ◐3 ✗5`, `12 ✗5` or `✗5`; work sent back: `12 ↩`, `↩12`."""
    d = fit.label_digits
    total = (f"{edge.messages:<{d}}", Style(bold=True) if edge.messages else QUIET)
    if fit.label == "none":
        return ()
    if edge.kind is EdgeKind.RETURNS:
        back = STATE_STYLE[AgentState.WORKING] if edge.messages else QUIET
        if fit.label == "short":
            return ((f"↩{edge.messages:<{d}}", back),)
        return (total, (" ↩", back))
    if fit.label == "short":
        return counts_pieces(edge.labels, (Label.CONTAMINATED,), d)
    shown = (Label.CONTAMINATED,) if fit.label == "mid" else (Label.CONTAINED, Label.CONTAMINATED)
    return (total, (" ", Style()), *counts_pieces(edge.labels, shown, d))


def mark_pieces(agent: AgentView, inner: int) -> Pieces:
    """`!5 failed here` on the bottom border: results whose own tool calls failed."""
    if not agent.origins:
        return ()
    n = agent.origins
    for text in (f" !{n} failed here ", f"!{n} failed here", f" !{n} failed ", f"!{n} failed",
                 f"!{n}"):  # fmt: skip
        if len(text) <= inner:
            return ((text, Style(color=RED, bold=True)),)
    return ()


def node_look(agent: AgentView, tick: int, fit: Fit, box: Box) -> NodeLook:
    if agent.batch >= 0 and tick - agent.batch < PULSE_TICKS and agent.last_label is not None:
        border = STATE_STYLE[LABEL_STATE[agent.last_label]] + Style(bold=True)
    elif agent.working:
        border = WORKING
    else:
        border = Style(color=GREY)
    counts = count_rows(agent.counts, fit, box.h - 2)
    return NodeLook(border, counts, mark_pieces(agent, box.w - 2))


def edge_look(edge: EdgeView, tick: int, fit: Fit) -> EdgeLook:
    label = label_pieces(edge, fit)
    if not edge.messages:
        return EdgeLook(Style(color=GREY, dim=True), 0, label)
    lit = tick - edge.batch < PULSE_TICKS
    if edge.kind is EdgeKind.RETURNS or edge.label is None:
        colour = STATE_STYLE[AgentState.WORKING]  # work sent back carries no verdict
    else:
        colour = STATE_STYLE[LABEL_STATE[edge.label if lit else _most(edge)]]
    if lit:
        dot = (tick - edge.batch) / PULSE_TICKS
        return EdgeLook(colour + Style(bold=True), 4 + LABEL_RANK[edge.label], label, dot)
    return EdgeLook(colour + QUIET, LABEL_RANK[_most(edge)], label)


def _most(edge: EdgeView) -> Label:
    order = (Label.CONTAMINATED, Label.CONTAINED, Label.CLEAN)  # ties: the worse one
    return max(order, key=lambda lb: (edge.labels[lb], -order.index(lb)))


def digits_of(model: RunModel) -> tuple[int, int]:
    """Room for the counts of boxes and arrows: the run's trials (a send-back may take
    an arrow twice a trial), more if more arrived (an attached run of unknown size)."""
    total = model.total or 99
    sent_back = any(e.kind is EdgeKind.RETURNS for e in model.edges.values())
    most_box = max((n for a in model.agents.values() for n in a.counts.values()), default=0)
    most_edge = max((e.messages for e in model.edges.values()), default=0)
    box = max(total, most_box)
    edge = max(total * (2 if sent_back else 1), most_edge)
    return len(str(box)), len(str(edge))


class GraphView(View):
    DEFAULT_CSS = """
    GraphView { width: auto; height: auto; text-wrap: nowrap; text-overflow: clip; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.layout_: Layout | None = None
        self._shape: tuple[object, ...] = ()

    def travelling(self, model: RunModel, tick: int) -> Region | None:
        """Where the latest message is travelling to: the box a scrolled graph keeps in
        view (None when nothing travels)."""
        lay = self.layout_
        lit = [e for e in model.edges.values() if e.messages and tick - e.batch < PULSE_TICKS]
        if lay is None or not lit:
            return None
        box = lay.boxes.get(max(lit, key=lambda e: e.order).dst)
        return Region(box.x, box.y, box.w, box.h) if box else None

    @property
    def node_count(self) -> int:
        return len(self.layout_.boxes) if self.layout_ else 0

    def show(self, model: RunModel, tick: int, room: tuple[int, int]) -> None:
        digits = digits_of(model)
        key = (tuple(model.agents), tuple(model.edges), room, digits)
        relayout = self.layout_ is None or key != self._shape
        if relayout:
            self._shape = key
            self.layout_ = fit_layout(list(model.agents), list(model.edges), room, fits(*digits))
        lay = self.layout_
        assert lay is not None
        if relayout:  # its size, so that a panel it overflows scrolls both ways
            self.styles.width, self.styles.height = lay.width, lay.height
        nodes = {name: node_look(a, tick, lay.fit, lay.boxes[name])
                 for name, a in model.agents.items() if name in lay.boxes}  # fmt: skip
        edges = {key: edge_look(e, tick, lay.fit) for key, e in model.edges.items()}
        frame = (tuple(nodes.values()), tuple(edges.values()))
        self.set(draw(lay, nodes, edges), key=None if relayout else frame, layout=relayout)
