"""What the run logs while the TUI draws: a toast in the app, not text on its screen.

The command line's logging writes warnings to stderr (errorflow/cli/main.py); under the
TUI they landed in the middle of the drawn screen (a python agent's failure, a lost
agent). While the app runs, the root logger's handlers are set aside and its warnings
are the app's notifications; they are given back when the app ends.
"""

from __future__ import annotations

import logging

from textual.app import App


class LogToasts(logging.Handler):
    def __init__(self, app: App[int]) -> None:
        super().__init__(logging.WARNING)
        self.app = app
        self.setFormatter(logging.Formatter("%(message)s"))
        self._set_aside: list[logging.Handler] = []

    def install(self) -> None:
        root = logging.getLogger()
        self._set_aside = root.handlers[:]
        root.handlers = [self]

    def remove(self) -> None:
        root = logging.getLogger()
        if self in root.handlers:
            root.handlers = self._set_aside

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception:  # a record that cannot be worded is not the run's failure
            return
        severity = "error" if record.levelno >= logging.ERROR else "warning"
        try:
            self.app.call_from_thread(self._toast, text, severity)
        except RuntimeError:  # on the app's own thread (or it has stopped)
            self._toast(text, severity)

    def _toast(self, text: str, severity: str) -> None:
        self.app.notify(text, severity=severity, markup=False, timeout=10)  # type: ignore[arg-type]
