"""Colours and glyphs of states, labels and outcomes: one place, so every view agrees.

Every colour comes with a glyph and a word: the states must read without colour too.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from errorflow.policies.breaker import BreakerState
from errorflow.scoring.score import Label, Outcome
from errorflow.tui.state import STATE_OF_LABEL, AgentState

GREEN, YELLOW, RED, BLUE, GREY = "#4ec96f", "#e5c07b", "#ef5a5a", "#61afef", "#8a8a8a"

STATE_STYLE: dict[AgentState, Style] = {
    AgentState.IDLE: Style(color=GREY),
    AgentState.WORKING: Style(color=BLUE),
    AgentState.CLEAN: Style(color=GREEN),
    AgentState.CONTAINED: Style(color=YELLOW),
    AgentState.CONTAMINATED: Style(color=RED, bold=True),
}
STATE_GLYPH: dict[AgentState, str] = {
    AgentState.IDLE: "·",
    AgentState.WORKING: "…",
    AgentState.CLEAN: "✓",
    AgentState.CONTAINED: "◐",
    AgentState.CONTAMINATED: "✗",
}
LABEL_STATE = STATE_OF_LABEL  # one mapping, owned by the model
OUTCOME_STYLE: dict[Outcome, Style] = {
    Outcome.SUCCESS: Style(color=GREEN),
    Outcome.CONTAINED: Style(color=YELLOW),
    Outcome.CONTAMINATED: Style(color=RED, bold=True),
    Outcome.BUS_FAULT: Style(color=GREY),
    Outcome.INFRA_FAULT: Style(color=GREY, italic=True),
}
OUTCOME_GLYPH: dict[Outcome, str] = {
    Outcome.SUCCESS: "✓",
    Outcome.CONTAINED: "◐",
    Outcome.CONTAMINATED: "✗",
    Outcome.BUS_FAULT: "?",
    Outcome.INFRA_FAULT: "!",
}
BREAKER_LOOK: dict[BreakerState, tuple[str, Style]] = {
    BreakerState.CLOSED: ("closed", Style(color=GREEN)),
    BreakerState.OPEN: ("open", Style(color=RED, bold=True)),
    BreakerState.HALF_OPEN: ("half-open", Style(color=YELLOW)),
}
#: Arrow colours rank so that, where arrows share cells, the worst news shows.
LABEL_RANK = {None: 0, Label.CLEAN: 1, Label.CONTAINED: 2, Label.CONTAMINATED: 3}


def state_text(state: AgentState) -> Text:
    return Text(f"{STATE_GLYPH[state]} {state.value}", STATE_STYLE[state])


def label_text(label: Label | None) -> Text:
    if label is None:
        return Text("—", STATE_STYLE[AgentState.IDLE])
    return state_text(LABEL_STATE[label])


def outcome_text(outcome: Outcome, text: str | None = None) -> Text:
    return Text(text if text is not None else outcome.value, OUTCOME_STYLE[outcome])
