"""The per-agent policy panel: what each agent's policy decided so far (model steps,
retries, retries given up, guard blocks, loop stops), each tool's circuit breaker now
and its transitions over the run (`closed→open t3`), the last error code and the
confidence of the agent's last message."""

from __future__ import annotations

import time

from rich.table import Table
from rich.text import Text

from errorflow.core.display import for_terminal
from errorflow.policies.breaker import BreakerState
from errorflow.tui.drawing.flow import AgentView
from errorflow.tui.palette import BREAKER_LOOK
from errorflow.tui.state import RunModel
from errorflow.tui.view import View

#: Fastest the panel is drawn again (seconds).
REDRAW_S = 0.25
#: Breaker transitions listed per agent (the latest; older ones are counted).
STEPS_SHOWN = 4


def breakers_text(agent: AgentView) -> Text:
    out = Text()
    for i, (tool, state) in enumerate(sorted(agent.breakers.items())):
        word, style = BREAKER_LOOK[state]
        out.append((", " if i else "") + f"{for_terminal(tool)} ")
        out.append(word, style)
    return out if agent.breakers else Text("—", "dim")


def transitions_text(agent: AgentView) -> Text:
    """The breakers' latest transitions, oldest first: `metrics closed→open t3`."""
    steps = agent.breaker_steps
    if not steps:
        return Text("—", "dim")
    out = Text()
    if len(steps) > STEPS_SHOWN:
        out.append(f"+{len(steps) - STEPS_SHOWN} ", "dim")
    for i, step in enumerate(steps[-STEPS_SHOWN:]):
        try:
            _, style = BREAKER_LOOK[BreakerState(step.to)]
        except ValueError:
            style = None
        out.append(("  " if i else "") + for_terminal(f"{step.tool} {step.frm}→"))
        out.append(for_terminal(step.to), style or "")
        out.append(f" t{step.trial}", "dim")
    return out


def _n(value: int) -> Text:
    return Text(str(value), "bold" if value else "dim")


#: Below this width the breaker transitions go (the breakers' states stay).
TRANSITIONS_MIN_WIDTH = 120


def agent_table(model: RunModel, width: int = 200) -> Table:
    wide = width >= TRANSITIONS_MIN_WIDTH
    table = Table(box=None, padding=(0, 1), expand=True, header_style="bold dim")
    table.add_column("agent", no_wrap=True, overflow="ellipsis", max_width=16)
    for name in ("steps", "retry", "gave up", "guard", "stops"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("breakers", no_wrap=True, overflow="ellipsis", ratio=1)
    if wide:
        table.add_column("breaker transitions", no_wrap=True, overflow="ellipsis", ratio=2)
    # permission_denied, the longest common code, fits whole.
    table.add_column("last error", no_wrap=True, overflow="ellipsis", min_width=17)
    table.add_column("conf", justify="right", no_wrap=True)
    for agent in model.agents.values():
        cells: list[Text | str] = [
            Text(for_terminal(agent.name), "bold"),
            _n(agent.steps),
            _n(agent.retries),
            _n(agent.exhausted),
            _n(agent.guard_blocks),
            _n(agent.loop_stops),
            breakers_text(agent),
            *([transitions_text(agent)] if wide else []),
            Text(for_terminal(agent.last_error or "—"), "" if agent.last_error else "dim"),
            f"{agent.confidence:.2f}" if agent.confidence is not None else "—",
        ]
        table.add_row(*cells)
    return table


def _figures(a: AgentView) -> tuple[object, ...]:
    return (a.name, a.steps, a.retries, a.exhausted, a.guard_blocks, a.loop_stops,
            tuple(sorted(a.breakers.items())), len(a.breaker_steps), a.last_error,
            a.confidence)  # fmt: skip


class AgentTable(View):
    DEFAULT_CSS = "AgentTable { height: auto; }"
    _model: RunModel | None = None
    _rows = -1
    _shown: tuple[object, ...] = ()
    _drawn = 0.0
    _due = False

    def show(self, model: RunModel) -> None:
        self._model = model
        rows, width = len(model.agents), self.size.width or 200
        # Drawn again only when a figure changed, and at most every REDRAW_S: a table is
        # costly to lay out, and figures that change 20 times a second cannot be read.
        key = (width, tuple(_figures(a) for a in model.agents.values()))
        if key == self._shown:
            return
        wait = self._drawn + REDRAW_S - time.monotonic()
        if wait > 0 and rows == self._rows:
            if not self._due:
                self._due = True
                self.set_timer(wait, self._redraw)
            return
        self._shown, self._drawn = key, time.monotonic()
        self.set(agent_table(model, width), layout=rows != self._rows)
        self._rows = rows

    def _redraw(self) -> None:
        self._due = False
        if self._model is not None:
            self.show(self._model)

    def on_resize(self) -> None:
        if self._model is not None:  # the columns depend on the width
            self.show(self._model)
