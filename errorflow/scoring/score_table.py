"""A run's trial scores in memory that stays small over a run of any length.

A long run scores 100,000 trials or more; as `TrialScore` objects (a `Costs` of eight
float objects each, a policy dict, a reason) they cost about 1 KB a trial, most of the
memory such a run grows by. Their labels are in the store already (`RunOptions.
keep_messages=False` drops them), so what the run's summary and result still need is
kept here by column: an outcome byte, a depth, eight doubles, and the indexes of its
reason and its policy tally (each distinct reason and tally kept once) per trial. A score
read back is the one put in, without labels:
the same floats, so a summary made from it is the same to the last bit.

A mapping from trial number to score (the runner's `scores`), and `ordered()` is the
sorted, lazily materialised view `RunResult.scores` takes.
"""

from __future__ import annotations

from array import array
from collections.abc import Container, Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import overload

from errorflow.core.costs import ALL_COST_KEYS, Costs
from errorflow.scoring.score import Outcome, TrialScore

_OUTCOMES: tuple[Outcome, ...] = tuple(Outcome)
_CODE = {o: i + 1 for i, o in enumerate(_OUTCOMES)}  # 0: no score
_WIDTH = len(ALL_COST_KEYS)
Policy = dict[str, dict[str, float]]


class ScoreTable(MutableMapping[int, TrialScore]):
    def __init__(
        self, scores: Mapping[int, TrialScore] | None = None, *, capacity: int = 0
    ) -> None:
        """`capacity`: the run's number of trials, if known (room made once, exactly)."""
        self._outcome = bytearray()
        self._depth = array("i")
        self._costs = array("d")
        # Every scored trial has a reason ("failure reported"), and a run has a handful
        # of distinct ones: kept once each, a trial holds its index (0: none). A dict of
        # reasons by trial was ~100 bytes a trial, the largest growth left.
        self._reason = array("i")
        self._reasons: list[str] = [""]
        self._reason_index: dict[str, int] = {"": 0}
        # Policy tallies repeat from trial to trial (`researcher: stop_permission_denied
        # 1`): each distinct one is kept once, a trial holds its index (0: none).
        self._policy = array("i")
        self._policies: list[Policy] = [{}]
        self._policy_index: dict[tuple[tuple[str, tuple[tuple[str, float], ...]], ...], int] = {}
        # Partial credit repeats too (most trials: every fact right).
        self._struck = bytearray()
        self._credit = array("i")
        self._credits: list[dict[str, str]] = [{}]
        self._credit_index: dict[tuple[tuple[str, str], ...], int] = {(): 0}
        self._count = 0
        self._room(capacity)
        if scores:
            self.update(scores)

    def _grow(self, trial: int) -> None:
        more = trial + 1 - len(self._outcome)
        if more > 0:
            self._room(max(more, len(self._outcome) // 2))  # amortised, like a list

    def _room(self, more: int) -> None:
        zeros = bytes(more)
        self._outcome.extend(zeros)
        self._struck.extend(zeros)
        columns = (
            (self._depth, 1),
            (self._costs, _WIDTH),
            (self._reason, 1),
            (self._policy, 1),
            (self._credit, 1),
        )
        for column, width in columns:
            column.frombytes(zeros * (column.itemsize * width))

    def __setitem__(self, trial: int, score: TrialScore) -> None:
        if trial < 0 or trial != score.trial:
            raise KeyError(trial)
        self._grow(trial)
        if not self._outcome[trial]:
            self._count += 1
        self._outcome[trial] = _CODE[score.outcome]
        self._depth[trial] = score.depth
        at = trial * _WIDTH
        for i, key in enumerate(ALL_COST_KEYS):
            self._costs[at + i] = getattr(score.costs, key)
        self._reason[trial] = self._reason_of(score.reason)
        self._policy[trial] = self._policy_of(score.policy)
        self._struck[trial] = int(score.struck)
        self._credit[trial] = self._credit_of(score.credit)

    def _credit_of(self, credit: dict[str, str]) -> int:
        key = tuple(credit.items())
        index = self._credit_index.get(key)
        if index is None:
            index = self._credit_index[key] = len(self._credits)
            self._credits.append(dict(credit))
        return index

    def _reason_of(self, reason: str) -> int:
        index = self._reason_index.get(reason)
        if index is None:
            index = self._reason_index[reason] = len(self._reasons)
            self._reasons.append(reason)
        return index

    def _policy_of(self, policy: Policy) -> int:
        if not policy:
            return 0
        key = tuple((a, tuple(sorted(c.items()))) for a, c in sorted(policy.items()))
        index = self._policy_index.get(key)
        if index is None:
            index = self._policy_index[key] = len(self._policies)
            self._policies.append({a: dict(c) for a, c in policy.items()})
        return index

    def __getitem__(self, trial: int) -> TrialScore:
        if not 0 <= trial < len(self._outcome) or not self._outcome[trial]:
            raise KeyError(trial)
        return TrialScore(
            trial,
            _OUTCOMES[self._outcome[trial] - 1],
            self._depth[trial],
            costs=self._costs_at(trial),
            reason=self._reasons[self._reason[trial]],
            policy={a: dict(c) for a, c in self._policies[self._policy[trial]].items()},
            credit=dict(self._credits[self._credit[trial]]),
            struck=bool(self._struck[trial]),
        )

    def _costs_at(self, trial: int) -> Costs:
        at = trial * _WIDTH
        return Costs(*self._costs[at : at + _WIDTH])  # in field order, as put in

    def costs_of(self, trials: Iterable[int], skip: Container[Outcome]) -> Iterator[Costs]:
        """The costs of those of `trials` held here whose outcome is not in `skip`, in
        the order given, read from the columns (no score made)."""
        skipped = {0, *(_CODE[o] for o in _OUTCOMES if o in skip)}  # 0: none, or deleted
        codes = self._outcome
        return (self._costs_at(t) for t in trials if codes[t] not in skipped)

    def __delitem__(self, trial: int) -> None:
        if trial not in self:
            raise KeyError(trial)
        self._outcome[trial] = 0
        self._count -= 1
        self._reason[trial] = 0
        self._policy[trial] = 0
        self._credit[trial] = 0
        self._struck[trial] = 0

    def __contains__(self, trial: object) -> bool:
        return (
            isinstance(trial, int)
            and 0 <= trial < len(self._outcome)
            and (self._outcome[trial] != 0)
        )

    def __iter__(self) -> Iterator[int]:
        """Trial numbers, in order."""
        return (t for t, code in enumerate(self._outcome) if code)

    def __len__(self) -> int:
        return self._count

    def ordered(self) -> OrderedScores:
        return OrderedScores(self)


class OrderedScores(Sequence[TrialScore]):
    """The table's scores in trial order, made one at a time as they are read."""

    def __init__(self, table: ScoreTable) -> None:
        self._trials = array("q", table)
        self._table = table

    @overload
    def __getitem__(self, index: int) -> TrialScore: ...
    @overload
    def __getitem__(self, index: slice) -> list[TrialScore]: ...
    def __getitem__(self, index: int | slice) -> TrialScore | list[TrialScore]:
        if isinstance(index, slice):
            return [self._table[t] for t in self._trials[index]]
        return self._table[self._trials[index]]

    def __len__(self) -> int:
        return len(self._trials)

    def __iter__(self) -> Iterator[TrialScore]:
        return (self._table[t] for t in self._trials)

    def costs(self, skip: Container[Outcome]) -> Iterator[Costs]:
        """The costs of the trials whose outcome is not in `skip`, in trial order, read
        from the table's columns (no score made: a summary reads each cost column)."""
        return self._table.costs_of(self._trials, skip)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __repr__(self) -> str:
        return f"OrderedScores({len(self)} trials)"


def score_map(keep_labels: bool, trials: int = 0) -> MutableMapping[int, TrialScore]:
    """Where a run of `trials` keeps its scores: a dict of the whole scores (labels too),
    or a table."""
    return {} if keep_labels else ScoreTable(capacity=trials)


def in_trial_order(scores: Mapping[int, TrialScore]) -> Sequence[TrialScore]:
    if isinstance(scores, ScoreTable):
        return scores.ordered()
    return [scores[t] for t in sorted(scores)]
