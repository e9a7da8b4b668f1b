"""The agent graph widget: the scenario's topology as boxes and arrows, live colours.

A box takes the colour of its agent's current state; an arrow takes the label of the
last message that travelled it, so a red arrow is contamination on its way and a
yellow box with yellow arrows after it is where containment stopped it. A `●` rides
an arrow for a few ticks after a message crossed it.
"""

from __future__ import annotations

from rich.style import Style

from errorflow.tui.layout import EdgeLook, Layout, NodeLook, draw, layout
from errorflow.tui.palette import LABEL_RANK, LABEL_STATE, STATE_GLYPH, STATE_STYLE
from errorflow.tui.state import RunModel
from errorflow.tui.view import View

#: How many UI ticks the `●` stays on an arrow after a message.
PULSE_BATCHES = 6


class GraphView(View):
    DEFAULT_CSS = """
    GraphView { width: auto; height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._layout: Layout | None = None
        self._shape: tuple[tuple[str, ...], tuple[tuple[str, str], ...]] = ((), ())

    @property
    def node_count(self) -> int:
        return len(self._layout.boxes) if self._layout else 0

    def show(self, model: RunModel, tick: int) -> None:
        shape = (tuple(model.agents), tuple(model.edges))
        relayout = self._layout is None or shape != self._shape
        if self._layout is None or relayout:
            self._shape = shape
            self._layout = layout(list(shape[0]), list(shape[1]))
        nodes = {
            name: NodeLook(STATE_STYLE[a.state], f"{STATE_GLYPH[a.state]} {a.state.value}")
            for name, a in model.agents.items()
        }
        edges = {}
        for key, e in model.edges.items():
            style = STATE_STYLE[LABEL_STATE[e.label]] if e.label else Style(dim=True)
            pulse = e.messages > 0 and tick - e.batch < PULSE_BATCHES
            edges[key] = EdgeLook(style, LABEL_RANK[e.label], pulse)
        frame = (tuple(nodes.values()), tuple(edges.values()))
        self.set(draw(self._layout, nodes, edges), key=None if relayout else frame,
                 layout=relayout)  # fmt: skip
