"""`errorflow run --otlp URL`: each trial sent as an OpenTelemetry trace while the run
goes on. A thread reads the store every few seconds (read-only, beside the writer) and
sends the trials scored since; when the run ends it sends the rest. A receiver that
refuses is said once, at the end: the run itself is not stopped for it.

Trials a worker process ran reach the store when the workers' stores are merged, so
with `--workers` they are sent then.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

from errorflow.cli.trace_exports import otlp_module
from errorflow.core.errors import ErrorflowError
from errorflow.store.readers import StoredRun, get_run, group_runs, trial_rows
from errorflow.store.trial_store import load_trace

#: Seconds between two reads of the store.
EVERY_S = 2.0


class LiveOtlp:
    """Sends the trials of a run (or of every run of a group) as they are scored."""

    def __init__(
        self, db: Path, ident: str, endpoint: str, clock: str = "wall", every_s: float = EVERY_S
    ) -> None:
        self.db, self.ident, self.endpoint, self.clock = db, ident, endpoint, clock
        self.every_s = every_s
        self.otlp = otlp_module()
        self.sent: set[tuple[str, int]] = set()
        self.spans = 0
        self.polls = 0
        self.failure: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="otlp-live", daemon=True)

    def __enter__(self) -> LiveOtlp:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        self.poll()  # what was scored since the last read

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.poll()

    def _runs(self) -> list[StoredRun]:
        runs = group_runs(self.db, self.ident)
        run = None if runs else get_run(self.db, self.ident)
        return runs or ([run] if run is not None else [])

    def poll(self) -> None:
        """Send every scored trial not sent yet (nothing once the receiver refused)."""
        if self.failure is not None:
            return
        self.polls += 1
        try:
            runs = self._runs()
        except (OSError, sqlite3.Error, ErrorflowError):
            return  # the store is not there yet: the run has not begun writing
        for run in runs:
            self._send_run(run)

    def _send_run(self, run: StoredRun) -> None:
        run_id = run["run_id"]
        scored = (t["trial"] for t in trial_rows(self.db, run_id))
        new = [n for n in scored if (run_id, n) not in self.sent]
        if not new:
            return
        models = self.otlp.agent_models(run["scenario_json"])
        resource = self.otlp.run_resource(run_id, run["scenario"])
        spans: list[Any] = []
        for n in new:
            trace = load_trace(self.db, run_id, n)
            if trace is not None:
                spans += self.otlp.trial_spans(trace, models, resource, self.clock)
        try:
            self.spans += self.otlp.send(spans, self.endpoint)
        except ConnectionError as exc:
            self.failure = str(exc)
            return
        self.sent.update((run_id, n) for n in new)

    def said(self) -> str:
        """One line for stderr: what was sent, or why the receiver got nothing more."""
        done = f"sent {self.spans} spans of {len(self.sent)} trial(s) to {self.endpoint}"
        return done if self.failure is None else f"{done}; then: {self.failure}"
