"""A widget that shows one renderable and repaints it without a relayout.

`Static.update` asks for a layout pass of the whole screen on every call (the new
content might change its size). The views here are redrawn up to 20 times a second
while their size almost never changes, and a relayout re-measures every widget on the
screen, so they say when their size may have changed (`layout=True`) and otherwise
only repaint. A `key` lets a caller skip identical frames altogether.
"""

from __future__ import annotations

from collections.abc import Hashable

from rich.console import RenderableType
from textual.widget import Widget


class View(Widget):
    DEFAULT_CSS = "View { height: auto; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._content: RenderableType = ""
        self._key: Hashable = object()

    def set(self, content: RenderableType, *, key: Hashable = None, layout: bool = False) -> None:
        if key is not None and key == self._key:
            return
        self._key, self._content = key, content
        self.refresh(layout=layout)

    @property
    def content(self) -> RenderableType:
        return self._content

    def render(self) -> RenderableType:
        return self._content
