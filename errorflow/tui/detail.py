"""One message in full: the whole envelope, its label, and its provenance (the chain of
messages it was derived from, as far back as this view has seen)."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from errorflow.core.display import for_terminal, json_text
from errorflow.protocol.envelope import Kind
from errorflow.tui.feed import status_text
from errorflow.tui.palette import label_text
from errorflow.tui.state import RunModel


def provenance_text(model: RunModel, message_id: str) -> Text:
    out = Text()
    for depth, env, mid in model.provenance(message_id):
        out.append("  " * depth + ("└ " if depth else ""))
        if env is None:
            out.append(f"{for_terminal(mid[:12])}… (not seen)\n", "dim")
            continue
        out.append(for_terminal(f"t{env.trial} {env.sender} → {env.recipient} "), "bold")
        out.append_text(status_text(env))
        out.append(f" conf {env.confidence:.2f} " if env.kind is Kind.RESULT else " ")
        if env.errors:
            out.append(", ".join(e.code.value for e in env.errors) + " ", "red")
        out.append_text(label_text(model.labels.get(env.id)))
        out.append("\n")
    out.rstrip()
    return out


def detail(model: RunModel, message_id: str) -> RenderableType:
    env = model.messages.get(message_id)
    if env is None:
        return Text("message no longer in memory", "dim")
    label = model.labels.get(message_id)
    body = json_text(env.model_dump(mode="json"))  # no control character left raw
    return Group(
        Text.assemble(("label: ", "bold"), label_text(label)),
        Text("provenance (derived_from)", "bold underline"),
        provenance_text(model, message_id),
        Text(""),
        Text("envelope", "bold underline"),
        Syntax(body, "json", theme="ansi_dark", word_wrap=True, background_color="default"),
    )


class DetailScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    DetailScreen { align: center middle; }
    DetailScreen > VerticalScroll {
        width: 90%; height: 90%; border: round $accent; background: $surface;
        padding: 0 1;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,enter,q", "dismiss_detail", "close"),
    ]

    def __init__(self, model: RunModel, message_id: str) -> None:
        super().__init__()
        self.model, self.message_id = model, message_id

    def compose(self) -> ComposeResult:
        with VerticalScroll() as scroll:
            scroll.border_title = "message"
            yield Static(detail(self.model, self.message_id))

    def action_dismiss_detail(self) -> None:
        self.dismiss(None)
