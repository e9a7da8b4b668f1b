"""A stored sweep's derived measures, rebuilt from the store for `errorflow report`.

Every run of a sweep stores the scenario it ran, `sweep:` block included; the measures
are computed again from that block and the runs' outcome counts, so a report says what
`errorflow sweep` printed (and a sweep made with `--vary`, whose cells are not the
block's, gets no measures).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import TypedDict

from pydantic import ValidationError

from errorflow.reports.sweep_measure_table import measure_head, measure_notes, measure_rows
from errorflow.scenario.spec.sweep_model import SweepSpec
from errorflow.scoring.summary import OutcomeCounts
from errorflow.scoring.sweep_measures import MeasuresJson, success_counts, sweep_measures
from errorflow.store.readers import StoredRun


class SweepAxisJson(TypedDict):
    name: str
    values: list[str]


class SweepReportJson(TypedDict):
    """The measures of a stored sweep, with its axes (for the row order)."""

    axes: list[SweepAxisJson]
    counts: dict[str, list[int]]  # [success, measured trials] by cell label
    measures: MeasuresJson
    source: str | None  # the reference's source, when it gave figures


def stored_sweep(
    runs: Sequence[StoredRun], outcomes: Mapping[str, OutcomeCounts]
) -> SweepReportJson | None:
    """The measures of the sweep `runs` are (`outcomes` by cell label), or None when
    they are no sweep with measures whose cells are its block's."""
    arms = [r for r in runs if not (r["label"] or "").endswith(":baseline")]
    if not arms:
        return None
    data = json.loads(arms[0]["scenario_json"])
    try:
        spec = SweepSpec.model_validate(data.get("sweep"))
    except ValidationError:
        return None  # no sweep block (a paired run), or one this version cannot read
    if spec.measures is None:
        return None
    axes = [(a.name, list(a.values)) for a in spec.axes]
    labels = {"/".join(c) for c in itertools.product(*(values for _, values in axes))}
    if not set(outcomes) <= labels:
        return None  # `--vary` cells, not the block's
    counts = {label: success_counts(o, sum(o.values())) for label, o in outcomes.items()}
    reference = data.get("reference") or {}
    return {
        "axes": [{"name": name, "values": values} for name, values in axes],
        "counts": {label: list(c) for label, c in counts.items()},
        "measures": sweep_measures(axes, spec.measures, counts, reference.get("cells")),
        "source": reference.get("source"),
    }


def sweep_table(sweep: SweepReportJson) -> tuple[list[str], list[list[str]], list[str]]:
    """Head, rows and notes of the measures table (a published figure in brackets
    after ours)."""
    measures = sweep["measures"]
    head = measure_head(measures, [a["name"] for a in sweep["axes"]])
    successes = {label: f"{s}/{n}" for label, (s, n) in sweep["counts"].items()}
    rows = [
        [f"{mine} (pub. {theirs})" if theirs else mine for mine, theirs in zip(o, t, strict=True)]
        for o, t in measure_rows(measures, [a["values"] for a in sweep["axes"]], successes)
    ]
    notes = measure_notes(measures)
    if sweep["source"] and measures["published"]:
        notes.append(f"pub.: {sweep['source']}")
    return head, rows, notes
