"""The sweep's derived measures as text: a row per cell, a column per measure, the
published figure beside each (errorflow.scoring.sweep_measures computes them).

`measure_rows` is the plain-text form the terminal table and the stored report share:
ours, and the published figure of each column beside.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Literal

from rich.console import Group
from rich.table import Table
from rich.text import Text

from errorflow.core.display import for_terminal
from errorflow.scoring.sweep_measures import BASELINE, MeasureJson, MeasuresJson

#: Column headings by measure kind.
HEADINGS = {"drop": "drop", "recovered": "recovered", "amplification": "error ×"}

#: What each kind is measured against, in a sentence's words.
MEANINGS = {
    "drop": "performance drop, (s_base − s)/s_base, against {against}",
    "recovered": "share of the drop recovered, against {against}",
    "amplification": "error amplification, (1 − s)/(1 − s_single), against {against}",
}


def measure_text(kind: str, m: MeasureJson) -> str:
    """A measure as a cell: value and 95 % interval, `base` or `n/a` when it has none,
    and the paired test's p-value when the cells' trials were paired."""
    value, ci = m["value"], m["ci95"]
    if value is None:
        return "base" if m["note"] == BASELINE else "n/a"
    if kind == "amplification":
        text = f"{value:.2f}×" + (f" [{ci[0]:.1f},{ci[1]:.1f}]" if ci else "")
    else:
        text = f"{value:.0%}" + (f" [{ci[0] * 100:.0f},{ci[1] * 100:.0f}]" if ci else "")
    paired = m.get("paired")
    if paired is None:
        return text
    p = paired["p"]
    return f"{text} p<0.001" if p < 0.001 else f"{text} p={p:.2g}"


def measure_head(data: MeasuresJson, axis_names: Sequence[str]) -> list[str]:
    return [*axis_names, "success", *(HEADINGS.get(k, k) for k in data["against"])]


def measure_rows(
    data: MeasuresJson, axis_values: Sequence[Sequence[str]], successes: dict[str, str]
) -> list[tuple[list[str], list[str]]]:
    """A row per cell in axis order: its values, its success count and each measure,
    with the published figure of each measure ("" when none) beside."""
    rows = []
    for combo in itertools.product(*axis_values):
        label = "/".join(combo)
        if label not in data["cells"]:
            continue
        ours = [*combo, successes.get(label, "")]
        theirs = [""] * len(ours)
        for kind in data["against"]:
            ours.append(measure_text(kind, data["cells"][label][kind]))
            theirs.append(data["published"].get(label, {}).get(kind, ""))
        rows.append((ours, theirs))
    return rows


def measure_notes(data: MeasuresJson) -> list[str]:
    """What each column means and what it is measured against."""
    notes = []
    for kind, ref in data["against"].items():
        against = f"{ref['axis']} = {ref['value']} (the other axes at the cell's values)"
        notes.append(MEANINGS.get(kind, kind).format(against=against))
    notes.append(
        "s: success over the measured trials; [low, high]: 95 % interval (none for "
        "recovered); base: the cell measured against; n/a: undefined (--json says why)"
    )
    if any("paired" in m for row in data["cells"].values() for m in row.values()):
        notes.append(
            "p: exact McNemar test of the cell's success against that cell's, trial by "
            "trial (the cells share seeds); --json has the paired difference and its interval"
        )
    return notes


def measure_table(
    scenario: str,
    data: MeasuresJson,
    axes: Sequence[tuple[str, Sequence[str]]],
    successes: dict[str, str],
    source: str | None = None,
) -> Group:
    """The terminal table of the measures, a published figure in dim under ours (every
    string shown as it is, never markup)."""
    table = Table(title=Text(f"{for_terminal(scenario)}: measures"), title_justify="left")
    for i, heading in enumerate(measure_head(data, [name for name, _ in axes])):
        justify: Literal["left", "right"] = "left" if i < len(axes) else "right"
        table.add_column(Text(for_terminal(heading)), justify=justify)
    for ours, theirs in measure_rows(data, [values for _, values in axes], successes):
        cells = []
        for mine, published in zip(ours, theirs, strict=True):
            cell = Text(for_terminal(mine))
            if published:
                cell.append(f"\npub. {for_terminal(published)}", style="dim")
            cells.append(cell)
        table.add_row(*cells)
    notes = measure_notes(data)
    if source and data["published"]:
        notes.append(f"pub.: {source}")
    return Group(table, *(Text(for_terminal(n), style="dim") for n in notes))
