"""The one-line header: scenario, propagation, where the run comes from, and state."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from errorflow.tui.state import RunModel
from errorflow.tui.view import View


def header_line(model: RunModel, mode: str, *, paused: bool, pending: int, note: str = "") -> Table:
    name = model.scenario.name if model.scenario else model.run_id
    left = Text.assemble(
        ("errorflow ", "bold"),
        (name, "bold cyan"),
        "  ",
        (model.propagation, "bold magenta"),
        ("  " + mode, "dim"),
    )
    if paused:
        right = Text.assemble(
            ("⏸ paused", "bold yellow"), f"  {pending} queued  ", (model.last_event, "dim")
        )
    elif note:
        right = Text(note, "yellow")
    else:
        right = Text(model.last_event, "dim")
    grid = Table.grid(expand=True, padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(no_wrap=True, justify="right", overflow="ellipsis", ratio=1)
    grid.add_row(left, right)
    return grid


class RunHeader(View):
    DEFAULT_CSS = "RunHeader { height: 1; background: $panel; padding: 0 1; }"

    def show(
        self, model: RunModel, mode: str, *, paused: bool, pending: int, note: str = ""
    ) -> None:
        self.set(header_line(model, mode, paused=paused, pending=pending, note=note))
