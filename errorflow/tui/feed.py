"""The message feed: one row per task/result message, newest last, following the tail
until the user moves the cursor up. Enter on a row opens the whole envelope."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from errorflow.bus.envelope import Envelope, Kind, Status
from errorflow.tui.palette import GREEN, RED, YELLOW, label_text
from errorflow.tui.state import FeedItem, RunModel

#: Rows kept while following the tail; older rows are dropped in one go past 1.5×.
ROW_LIMIT = 500

STATUS_LOOK = {
    Status.OK: ("ok", GREEN),
    Status.PARTIAL_FAILURE: ("partial", YELLOW),
    Status.FAILED: ("failed", RED),
}


def status_text(env: Envelope) -> Text:
    if env.kind is Kind.TASK:
        return Text("task", "dim")
    word, colour = STATUS_LOOK[env.status]
    return Text(word, colour)


def errors_text(env: Envelope) -> Text:
    codes = [e.code.value for e in env.errors]
    return Text(", ".join(codes), RED) if codes else Text("—", "dim")


def row(item: FeedItem) -> tuple[Text | str, ...]:
    env = item.env
    return (
        f"t{env.trial}",
        Text.assemble((env.sender, "bold"), " → ", env.recipient),
        status_text(env),
        "" if env.kind is Kind.TASK else f"{env.confidence:.2f}",
        errors_text(env),
        label_text(item.label) if env.kind is Kind.RESULT else Text(""),
    )


class FeedTable(DataTable[Text | str]):
    DEFAULT_CSS = "FeedTable { height: 1fr; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        self._tail: list[FeedItem] = []  # what is on screen, oldest first

    def on_mount(self) -> None:
        for label, key in (
            ("#", "trial"),
            ("from → to", "route"),
            ("status", "status"),
            ("conf", "conf"),
            ("errors", "errors"),
            ("label", "label"),
        ):
            self.add_column(label, key=key)

    def reset(self) -> None:
        self.clear()
        self._tail = []

    @property
    def following(self) -> bool:
        return self.row_count == 0 or self.cursor_row >= self.row_count - 1

    def show(self, model: RunModel) -> None:
        new, relabelled = model.take_feed()
        if not new and not relabelled:
            return
        follow = self.following
        fresh = {id(item) for item in new}
        for item in relabelled:
            if id(item) not in fresh and item.env.id in self.rows:
                self.update_cell(item.env.id, "label", label_text(item.label))
        self._tail.extend(new)
        if follow and len(self._tail) > ROW_LIMIT * 3 // 2:
            self._tail = self._tail[-ROW_LIMIT:]
            self.clear()
            new = self._tail
        for item in new:
            self.add_row(*row(item), key=item.env.id)
        if follow:
            self.move_cursor(row=self.row_count - 1, animate=False)

    def selected_id(self) -> str | None:
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        return key.value
