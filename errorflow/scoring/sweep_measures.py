"""Derived measures of a sweep: performance drop, recovered share, error amplification.

Each measure compares a cell with the cell that differs from it on one axis only (the
`against` value of that axis; every other axis at the cell's own value), from the
success counts alone (success over the trials that measured something):

- drop = (s_base − s_cell) / s_base, s the success rate, against a fault-free value
  (Huang et al.'s performance drop); negative when the cell did better;
- recovered = (drop_none − drop_cell) / drop_none, against a no-defence value: the
  share of the no-defence cell's drop the defence won back (n/a without a drop);
- amplification = e_cell / e_single, e = 1 − s the error rate, against a single-agent
  value (Kim et al.'s error amplification; n/a when the single agent never erred).

Drop and amplification carry a 95 % interval of the ratio of two independent
proportions (MOVER from Wilson intervals: `ratio_ci`); recovered is a ratio of ratios
and carries its counts only. Every measure lists the [success, measured trials] of
each cell it was computed from, so a reader can check it or compute their own interval.

The cells of a sweep run the same seeds, so trial i of one cell is trial i of every
other: when the trials' outcomes are given, each measure also carries `paired`, the
paired difference in success between the cell and the one it is measured against
(Newcombe's interval and the exact McNemar test, as `--propagation both` has it). The
ratio intervals treat the cells as independent and are wider than pairing allows; the
paired test is the one to read for "did this cell differ".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NotRequired, TypedDict

from errorflow.scenario.spec.sweep_model import CellRef, SweepMeasures
from errorflow.scoring.stats import PairedDifference, paired_difference, wilson

#: A sweep's axes as the measures see them: name and value labels, in order.
AxisLabels = Sequence[tuple[str, Sequence[str]]]
#: [success, measured trials] of a cell, by cell label (`v1/v2/v3`).
Counts = Mapping[str, tuple[int, int]]
#: The outcome value of each trial of a cell, in trial order, by cell label.
TrialOutcomes = Mapping[str, Sequence[str]]

#: Notes said instead of a value.
BASELINE = "baseline"  # the cell is the one the others are measured against
NO_TRIALS = "no measured trials"


class MeasureJson(TypedDict):
    value: float | None  # a fraction (drop, recovered) or a ratio; None: see `note`
    ci95: list[float] | None  # [low, high]; None: no interval (recovered, n/a)
    against: str  # the label of the cell it is measured against
    counts: dict[str, list[int]]  # [success, measured trials] of each cell it used
    note: str | None  # why there is no value (None when there is one)
    #: Success of the cell minus success of `against`, trial by trial (same seeds).
    paired: NotRequired[PairedDifference]


class MeasuresJson(TypedDict):
    """The measures of every cell, and what each is measured against."""

    against: dict[str, dict[str, str]]  # by kind: {"axis": ..., "value": ...}
    cells: dict[str, dict[str, MeasureJson]]  # by cell label, by kind
    #: Published figures matching each cell (errorflow.scoring.sweep_measures.published).
    published: dict[str, dict[str, str]]  # by cell label, by kind


def success_counts(outcomes: Mapping[str, int], trials: int) -> tuple[int, int]:
    """[success, measured trials]: infra-fault trials measured nothing and are left out."""
    return outcomes.get("success", 0), trials - outcomes.get("infra_fault", 0)


def ratio_ci(k1: int, n1: int, k0: int, n0: int) -> tuple[float, float] | None:
    """95 % interval of (k1/n1) / (k0/n0), two independent proportions: MOVER (Donner
    and Zou) on the log scale from the two Wilson intervals, so it stays honest at n/n
    (Katz's log interval collapses to a point when both are n/n); at k1 = 0 the ratio
    of the bounds, [0, u1/l0]. None: no trials, or k0 = 0 (no ratio)."""
    if n1 <= 0 or n0 <= 0 or k0 == 0:
        return None
    (l1, u1), (l0, u0) = wilson(k1, n1), wilson(k0, n0)
    if k1 == 0:
        return (0.0, u1 / l0)
    p1, p0 = k1 / n1, k0 / n0
    log_ratio = math.log(p1 / p0)
    down = math.hypot(math.log(p1 / l1), math.log(u0 / p0))
    up = math.hypot(math.log(u1 / p1), math.log(p0 / l0))
    return (math.exp(log_ratio - down), math.exp(log_ratio + up))


def other_cell(label: str, axes: AxisLabels, ref: CellRef) -> str:
    """The cell at `ref`'s value of its axis, every other axis at `label`'s values."""
    parts = label.split("/")
    names = [name for name, _ in axes]
    parts[names.index(ref.axis)] = ref.value
    return "/".join(parts)


def _measure(
    value: float | None,
    against: str,
    used: dict[str, tuple[int, int]],
    ci95: tuple[float, float] | None = None,
    note: str | None = None,
) -> MeasureJson:
    return {
        "value": None if value is None else round(value, 4),
        "ci95": None if ci95 is None or value is None else [round(x, 4) for x in ci95],
        "against": against,
        "counts": {label: list(c) for label, c in used.items()},
        "note": note,
    }


def drop(label: str, base: str, counts: Counts) -> MeasureJson:
    """(s_base − s_cell) / s_base, with the interval of 1 − s_cell/s_base."""
    if base not in counts:
        return _measure(None, base, {label: counts[label]}, note=f"n/a: {base} did not run")
    (k1, n1), (k0, n0) = counts[label], counts[base]
    used = {label: counts[label], base: counts[base]}
    if label == base:
        return _measure(None, base, used, note=BASELINE)
    if n1 <= 0 or n0 <= 0:
        return _measure(None, base, used, note=NO_TRIALS)
    if k0 == 0:
        return _measure(None, base, used, note="n/a: the baseline never succeeded")
    ratio = (k1 / n1) / (k0 / n0)
    ci = ratio_ci(k1, n1, k0, n0)
    return _measure(1 - ratio, base, used, None if ci is None else (1 - ci[1], 1 - ci[0]))


def recovered(drop_cell: MeasureJson, drop_none: MeasureJson, none: str) -> MeasureJson:
    """(drop_none − drop_cell) / drop_none: n/a unless the no-defence cell dropped."""
    used = {k: (v[0], v[1]) for m in (drop_cell, drop_none) for k, v in m["counts"].items()}
    d_cell, d_none = _exact_drop(drop_cell), _exact_drop(drop_none)
    if drop_cell is drop_none or drop_cell["note"] == BASELINE:
        return _measure(None, none, used, note=BASELINE)  # no defence, or no fault
    if d_none is None or d_cell is None:
        return _measure(None, none, used, note="n/a: a drop is undefined")
    if d_none <= 0:
        return _measure(None, none, used, note="n/a: no drop without the defence")
    return _measure((d_none - d_cell) / d_none, none, used)


def _exact_drop(m: MeasureJson) -> float | None:
    """A drop's value from its counts, not from its rounded `value` (a recovered share
    of two small drops would be off by a rounding of each)."""
    if m["value"] is None:
        return None
    counts = m["counts"]
    base = m["against"]
    (k1, n1), (k0, n0) = next(c for label, c in counts.items() if label != base), counts[base]
    return 1 - (k1 / n1) / (k0 / n0)


def amplification(label: str, single: str, counts: Counts) -> MeasureJson:
    """e_cell / e_single, e = 1 − success rate, with its interval."""
    if single not in counts:
        return _measure(None, single, {label: counts[label]}, note=f"n/a: {single} did not run")
    (k1, n1), (k0, n0) = counts[label], counts[single]
    used = {label: counts[label], single: counts[single]}
    if label == single:
        return _measure(None, single, used, note=BASELINE)
    if n1 <= 0 or n0 <= 0:
        return _measure(None, single, used, note=NO_TRIALS)
    e1, e0 = n1 - k1, n0 - k0
    if e0 == 0:
        return _measure(None, single, used, note="n/a: the single agent never erred")
    return _measure((e1 / n1) / (e0 / n0), single, used, ratio_ci(e1, n1, e0, n0))


def cell_measures(
    axes: AxisLabels, measures: SweepMeasures, counts: Counts
) -> dict[str, dict[str, MeasureJson]]:
    """Every declared measure of every cell, by cell label then kind."""
    declared = measures.declared()
    result: dict[str, dict[str, MeasureJson]] = {}
    drops: dict[str, MeasureJson] = {}
    if "drop" in declared:
        ref = declared["drop"]
        drops = {label: drop(label, other_cell(label, axes, ref), counts) for label in counts}
    for label in counts:
        row: dict[str, MeasureJson] = {}
        if "drop" in declared:
            row["drop"] = drops[label]
        if "recovered" in declared:
            none = other_cell(label, axes, declared["recovered"])
            if none in drops:
                row["recovered"] = recovered(drops[label], drops[none], none)
            else:
                row["recovered"] = _measure(None, none, {}, note=f"n/a: {none} did not run")
        if "amplification" in declared:
            single = other_cell(label, axes, declared["amplification"])
            row["amplification"] = amplification(label, single, counts)
        result[label] = row
    return result


def published(
    label: str,
    axes: AxisLabels,
    reference: Mapping[str, Mapping[str, object]],
    kinds: Sequence[str],
) -> dict[str, str]:
    """The published figure of each kind for a cell. A reference key is value labels
    joined by `/`, in axis order, naming one value of some of the axes (`linear`,
    `linear/none`, or the whole cell label); it matches every cell with those values.
    The most specific key (most values) wins, then the first written."""
    values = label.split("/")
    found: dict[str, tuple[int, str]] = {}
    for key, figures in reference.items():
        parts = key.split("/")
        if not _subsequence(parts, values) or len(values) != len(axes):
            continue
        for kind in kinds:
            if kind in figures and len(parts) > found.get(kind, (0, ""))[0]:
                found[kind] = (len(parts), str(figures[kind]))
    return {kind: found[kind][1] for kind in kinds if kind in found}


def _subsequence(parts: Sequence[str], values: Sequence[str]) -> bool:
    """`parts` are some of `values`, in the same order."""
    it = iter(values)
    return all(any(p == v for v in it) for p in parts)


def paired_success(cell: Sequence[str], against: Sequence[str]) -> PairedDifference | None:
    """Success of `cell` minus success of `against` on the same trials (None when they
    did not run the same trials); a trial either measured nothing in is left out."""
    if len(cell) != len(against):
        return None
    pairs = [(x, y) for x, y in zip(cell, against, strict=True) if "infra_fault" not in (x, y)]
    return paired_difference([x == "success" for x, _ in pairs], [y == "success" for _, y in pairs])


def _add_paired(cells: dict[str, dict[str, MeasureJson]], outcomes: TrialOutcomes) -> None:
    for label, row in cells.items():
        for m in row.values():
            against = m["against"]
            if against == label or label not in outcomes or against not in outcomes:
                continue
            paired = paired_success(outcomes[label], outcomes[against])
            if paired is not None:
                m["paired"] = paired


def sweep_measures(
    axes: AxisLabels,
    measures: SweepMeasures,
    counts: Counts,
    reference: Mapping[str, Mapping[str, object]] | None = None,
    outcomes: TrialOutcomes | None = None,
) -> MeasuresJson:
    """The measures document `errorflow sweep --json` and the report carry."""
    cells = cell_measures(axes, measures, counts)
    if outcomes is not None:
        _add_paired(cells, outcomes)
    figures = {}
    for label, row in cells.items():
        # A published figure is of a measured cell, not of the one measured against.
        kinds = [kind for kind, m in row.items() if m["note"] != BASELINE]
        found = published(label, axes, reference or {}, kinds)
        if found:
            figures[label] = found
    return {
        "against": {k: {"axis": r.axis, "value": r.value} for k, r in measures.declared().items()},
        "cells": cells,
        "published": figures,
    }
