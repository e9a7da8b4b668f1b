"""The help screen: the keys and what the colours mean."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from errorflow.tui.palette import state_text
from errorflow.tui.state import AgentState

KEYS = [
    ("space", "pause / resume the display (the run goes on; what arrives is queued)"),
    ("s", "while paused: show the next hop (a message and the events around it)"),
    ("+ / -", "faster / slower: ×1 shows two hops a second, ×max all as it comes"),
    ("t", "on a message: its trial, every message in provenance order with its label"),
    ("/", "filter the messages: a label, an agent, a trial (t3); escape clears"),
    ("enter", "on a message: the whole envelope and its provenance"),
    ("p", "flip propagation (explicit ↔ implicit) and rerun the same seeds"),
    ("c", "compare explicit and implicit on the same trials (paired)"),
    ("r", "rerun (replay: play the stored run again)"),
    ("a", "show / hide the per-agent policy panel"),
    ("g", "the graph alone, on the whole screen (g again: back)"),
    ("?", "this help"),
    ("q", "quit"),
]
STATES = {
    AgentState.WORKING: "box: has input, no answer yet",
    AgentState.CLEAN: "✓ n: trials its last message was clean (no failure touched it)",
    AgentState.CONTAINED: "◐ n: a failure reached it and it said so",
    AgentState.CONTAMINATED: "✗ n: it passed on something false as certain",
}


def help_table() -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True)
    table.add_column()
    for key, what in KEYS:
        table.add_row(Text(key, "bold"), what)
    table.add_row("", "")
    for state, what in STATES.items():
        table.add_row(state_text(state), what)
    table.add_row("", "")
    table.add_row(
        Text("!n", "bold red"),
        "on a box: n of its results carried a failure that "
        "started there (its own tool calls failed)",
    )
    table.add_row(
        Text("arrows", "bold"),
        "messages that crossed, ◐ contained, ✗ contaminated; "
        "lit (and a ● travelling) while a message crosses, in its label's colour",
    )
    return table


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 76; max-width: 95%; height: auto; max-height: 90%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "close", "close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll() as scroll:
            scroll.border_title = "keys"
            yield Static(help_table())

    def action_close(self) -> None:
        self.dismiss(None)
