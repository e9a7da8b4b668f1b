"""The one-line header: scenario, propagation, where the run comes from and at what
pace; on the right whether it is paused, what is queued, and the latest event.

Laid out to the column for the width it is given, never wider: what gives way first
is the latest event, then the left part's words, so the right end (the pause and the
queued count, the things a person acts on) is always on screen, in a terminal or a
browser tab of any width.
"""

from __future__ import annotations

from rich.text import Text

from errorflow.core.display import for_terminal
from errorflow.tui.state import RunModel
from errorflow.tui.view import View

#: Narrower than this, the latest event is left out rather than cut to a stub.
MIN_EVENT = 8


def header_line(
    model: RunModel,
    mode: str,
    *,
    paused: bool,
    pending: int,
    note: str = "",
    pace: str = "",
    width: int = 200,
) -> Text:
    # The run id, the scenario and the status line may all come from the bus.
    name = for_terminal(model.scenario.name if model.scenario else model.run_id)
    left = Text.assemble(
        ("errorflow ", "bold"),
        (name, "bold cyan"),
        "  ",
        (for_terminal(model.propagation), "bold magenta"),
        ("  " + mode, "dim"),
        (f" {pace}" if pace else "", "bold"),
    )
    state = Text()
    if paused:
        state.append("‖ paused  ", "bold yellow")
    if pending or paused:
        state.append(f"{pending} queued")
    event = Text(for_terminal(note or model.last_event), "yellow" if note else "dim")
    room = width - state.cell_len
    if left.cell_len + 2 > room:
        left.truncate(max(0, room - 2), overflow="ellipsis")
    space = room - left.cell_len - 2 - (2 if state else 0)
    right = state.copy()
    if space >= MIN_EVENT and event.plain:
        event.truncate(space, overflow="ellipsis")
        right = Text.assemble(state, "  " if state else "", event)
    gap = max(1, width - left.cell_len - right.cell_len)
    line = Text.assemble(left, " " * gap, right, no_wrap=True, overflow="crop")
    line.truncate(width)
    return line


class RunHeader(View):
    DEFAULT_CSS = "RunHeader { height: 1; background: $panel; padding: 0 1; text-wrap: nowrap; }"

    def show(
        self, model: RunModel, mode: str, *, paused: bool, pending: int, note: str = "",
        pace: str = "",
    ) -> None:  # fmt: skip
        width = self.content_region.width or 80
        key = (width, mode, paused, pending, note, pace, model.last_event, model.propagation,
               model.run_id, model.scenario.name if model.scenario else None)  # fmt: skip
        self.set(header_line(model, mode, paused=paused, pending=pending, note=note, pace=pace,
                             width=width), key=key)  # fmt: skip
