"""Root causes as trials end, from the envelopes the recorder has already decoded.

The recorder hands every task, result and agent event it files to `TrialCauses`, and
the runner's rows of a scored trial (outcome, labels). When the runner's own last word
on a trial (its `trial_outcome` event) reaches the recorder, everything the trial's
participants published before it has too (one bus, each publisher's order kept), so the
root cause is computed then, from exactly the rows the store holds, and written with
the next batch; the trial's envelopes are let go (memory stays flat).

What arrives for a trial after its cause was computed makes it stale: its row is
dropped at the end of the run and `store.root_causes.record` computes it from the
store, as it does for a trial whose outcome event never came.
"""

from __future__ import annotations

from errorflow.protocol.envelope import Envelope, Kind
from errorflow.protocol.result import Readings
from errorflow.protocol.topics import RUNNER
from errorflow.scoring.genealogy_types import StoredLabel
from errorflow.scoring.root_cause import FAILED_OUTCOMES
from errorflow.scoring.trial_trace import TrialOutcome
from errorflow.store.root_causes import cause_of, row_of
from errorflow.store.rows import LabelRow, TrialRow
from errorflow.store.trial_store import RunMeta, TrialRows


class TrialCauses:
    """The open trials' rows in memory, and the root-cause rows ready to store."""

    def __init__(self, meta: RunMeta) -> None:
        self.meta = meta
        self.open: dict[int, TrialRows] = {}
        self._seen_ids: dict[int, set[str]] = {}  # message ids per open trial (no repeats)
        self.computed = bytearray()  # by trial number: 1 once its cause is computed
        self.stale: set[int] = set()
        self.rows: list[tuple[object, ...]] = []

    def _rows(self, trial: int) -> TrialRows:
        rows = self.open.get(trial)
        if rows is None:
            rows = self.open[trial] = TrialRows(trial)
            self._seen_ids[trial] = set()
        return rows

    def _is_computed(self, trial: int) -> bool:
        return trial < len(self.computed) and self.computed[trial] == 1

    def filed(self, env: Envelope) -> None:
        """An envelope the recorder stored: kept when the store's trace would read it."""
        if env.kind in (Kind.TASK, Kind.RESULT):
            self._message(env)
        elif env.kind is Kind.EVENT and env.sender != RUNNER:
            if self._is_computed(env.trial):
                self.stale.add(env.trial)
                return
            self._rows(env.trial).events.append(env)

    def _message(self, env: Envelope) -> None:
        if self._is_computed(env.trial):
            self.stale.add(env.trial)
            return
        rows = self._rows(env.trial)
        ids = self._seen_ids[env.trial]
        if env.id not in ids:  # the store keeps the first copy (INSERT OR IGNORE)
            ids.add(env.id)
            rows.messages.append(env)

    def missing(self, trial: int, messages: list[Envelope]) -> list[Envelope]:
        """Of `messages` (the runner's copies of `trial`'s tasks and results), those not
        filed for the trial (a trial already computed has them all: no row to add)."""
        if self._is_computed(trial):
            return []
        ids = self._seen_ids.get(trial, set())
        return [m for m in messages if m.id not in ids]

    def backfilled(self, messages: list[Envelope]) -> None:
        """The runner's copies of a trial's tasks and results (stored unless there)."""
        for env in messages:
            if env.kind in (Kind.TASK, Kind.RESULT):
                self._message(env)

    def scored(
        self, row: TrialRow, labels: list[LabelRow], readings: Readings | None = None
    ) -> None:
        rows = self._rows(row.trial)
        rows.readings = readings
        rows.outcome = TrialOutcome(row.outcome, row.depth, row.reason)
        for lb in labels:
            rows.labels[lb.message_id] = StoredLabel(lb.label, lb.reason)

    def ended(self, trial: int) -> None:
        """The runner's outcome event of `trial` is in: its cause, if it failed."""
        rows = self.open.pop(trial, None)
        self._seen_ids.pop(trial, None)
        if rows is None or rows.outcome is None:
            return
        if trial >= len(self.computed):
            self.computed.extend(bytes(max(trial + 1 - len(self.computed), len(self.computed))))
        self.computed[trial] = 1
        if rows.outcome.outcome not in FAILED_OUTCOMES:
            return
        cause = cause_of(self.meta, rows)
        if cause is not None:
            self.rows.append(row_of(self.meta.run_id, trial, cause))

    def take(self) -> list[tuple[object, ...]]:
        rows, self.rows = self.rows, []
        return rows
