"""One trial: its verdict, its messages in provenance order, and its policy events.

Provenance order is the genealogy read forwards: the runner's task first, then each
message under the one it was derived from (a message with several parents, a writer's
report built from three researchers, sits under the last of them to arrive, and names
the others). Each line says who sent what to whom, its status, confidence, errors,
label and why it got that label, and `!code` where its sender's own tool calls failed;
so a contamination can be read from the tool that failed to the report that stated it
as a fact.
"""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from errorflow.core.display import for_terminal
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.protocol.result import failures_of
from errorflow.tui.feed import status_text
from errorflow.tui.palette import label_text, outcome_text
from errorflow.tui.state import RunModel


def genealogy(messages: list[Envelope]) -> list[tuple[int, Envelope, list[str]]]:
    """(depth, message, its other parents) in provenance order: depth first from the
    messages derived from nothing seen, children in arrival order."""
    ids = {m.id: i for i, m in enumerate(messages)}
    children: dict[str, list[Envelope]] = {}
    roots: list[Envelope] = []
    for m in messages:
        parents = [d for d in m.derived_from if d in ids]
        if parents:
            children.setdefault(max(parents, key=ids.__getitem__), []).append(m)
        else:
            roots.append(m)
    out: list[tuple[int, Envelope, list[str]]] = []
    seen: set[str] = set()

    def walk(m: Envelope, depth: int) -> None:
        if m.id in seen:
            return
        seen.add(m.id)
        parents = [d for d in m.derived_from if d in ids]
        others = [d for d in parents if d != max(parents, key=ids.__getitem__)] if parents else []
        out.append((depth, m, others))
        for child in children.get(m.id, []):
            walk(child, depth + 1)

    for root in roots:
        walk(root, 0)
    return out


def message_line(model: RunModel, env: Envelope, others: list[str],
                 names: dict[str, str]) -> Text:  # fmt: skip
    out = Text()
    out.append(for_terminal(f"{env.sender} → {env.recipient} "), "bold")
    out.append_text(status_text(env))
    own = failures_of(env.payload) if env.kind is Kind.RESULT else None
    if own:  # the failure starts here: its sender's own tool calls failed
        out.append("  !" + for_terminal(", ".join(map(str, own))), "bold red")
    if env.kind is Kind.RESULT:
        out.append(f"  conf {env.confidence:.2f}  ")
        out.append(", ".join(e.code.value for e in env.errors) or "no errors",
                   "red" if env.errors else "dim")  # fmt: skip
        out.append("  ")
        out.append_text(label_text(model.labels.get(env.id)))
        reason = model.reasons.get(env.id)
        if reason:
            out.append(f"  {for_terminal(reason)}", "italic")
    if others:
        out.append("  (also from " + ", ".join(names.get(o, "?") for o in others) + ")", "dim")
    return out


def trial_text(model: RunModel, trial: int) -> RenderableType:
    view = model.trials.get(trial)
    messages = model.trial_messages(trial)
    if view is None or not messages:
        return Text(f"trial {trial}: no messages in memory", "dim")
    head = Text.assemble((f"trial {trial}  ", "bold"))
    if view.outcome is None:
        head.append("running", "dim")
    else:
        head.append_text(outcome_text(view.outcome))
        if view.depth:
            head.append(f"  depth {view.depth}")
        if view.reason:
            head.append(f"  {for_terminal(view.reason)}", "italic")
    names = {m.id: for_terminal(m.sender) for m in messages}
    lines: list[RenderableType] = []
    for depth, env, others in genealogy(messages):
        line = Text("└ " if depth else "").append_text(message_line(model, env, others, names))
        lines.append(Padding(line, (0, 0, 0, 2 * depth)))  # wraps under its own depth
    events = model.trial_events.get(trial, [])
    title = Text("messages (provenance order)", "bold underline")
    parts: list[RenderableType] = [head, Text(""), title, *lines]
    if events:
        parts += [Text(""), Text("policy events", "bold underline")]
        parts += [Text(for_terminal(what), "dim") for _, what in events]
    return Group(*parts)


class TrialScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    TrialScreen { align: center middle; }
    TrialScreen > VerticalScroll {
        width: 95%; height: 90%; border: round $accent; background: $surface;
        padding: 0 1;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,t,q", "dismiss_trial", "close"),
    ]

    def __init__(self, model: RunModel, trial: int) -> None:
        super().__init__()
        self.model, self.trial = model, trial

    def compose(self) -> ComposeResult:
        with VerticalScroll() as scroll:
            scroll.border_title = f"trial {self.trial}"
            yield Static(trial_text(self.model, self.trial), id="trial-body")

    def action_dismiss_trial(self) -> None:
        self.dismiss(None)
