"""Per-agent figures: state, steps, retries, each tool's circuit breaker, the last error
code and the confidence of the agent's last message."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from errorflow.tui.palette import BREAKER_LOOK, state_text
from errorflow.tui.state import AgentView, RunModel
from errorflow.tui.view import View


def breakers_text(agent: AgentView) -> Text:
    out = Text()
    for i, (tool, state) in enumerate(sorted(agent.breakers.items())):
        word, style = BREAKER_LOOK[state]
        out.append((", " if i else "") + f"{tool} ")
        out.append(word, style)
    return out if agent.breakers else Text("—", "dim")


#: Below this width the state column goes: the graph shows the states already.
STATE_COLUMN_MIN_WIDTH = 100


def agent_table(model: RunModel, width: int = 200) -> Table:
    with_state = width >= STATE_COLUMN_MIN_WIDTH
    table = Table(box=None, padding=(0, 1), expand=True, header_style="bold dim")
    table.add_column("agent", no_wrap=True, overflow="ellipsis", max_width=16)
    if with_state:
        table.add_column("state", no_wrap=True, min_width=14)
    table.add_column("steps", justify="right", no_wrap=True)
    table.add_column("retry", justify="right", no_wrap=True)
    table.add_column("breakers", no_wrap=True, overflow="ellipsis", ratio=1)
    # permission_denied, the longest common code, fits whole.
    table.add_column("last error", no_wrap=True, overflow="ellipsis", min_width=17)
    table.add_column("conf", justify="right", no_wrap=True)
    for agent in model.agents.values():
        cells: list[Text | str] = [
            Text(agent.name, "bold"),
            *([state_text(agent.state)] if with_state else []),
            str(agent.steps),
            str(agent.retries),
            breakers_text(agent),
            Text(agent.last_error or "—", "" if agent.last_error else "dim"),
            f"{agent.confidence:.2f}" if agent.confidence is not None else "—",
        ]
        table.add_row(*cells)
    return table


class AgentTable(View):
    DEFAULT_CSS = "AgentTable { height: auto; }"
    _model: RunModel | None = None
    _rows = -1

    def show(self, model: RunModel) -> None:
        self._model = model
        rows = len(model.agents)
        self.set(agent_table(model, self.size.width or 200), layout=rows != self._rows)
        self._rows = rows

    def on_resize(self) -> None:
        if self._model is not None:  # the columns depend on the width
            self.show(self._model)
