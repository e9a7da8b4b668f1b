"""Reports of stored runs: one run, or a group (a paired comparison or a sweep).

`errorflow report ID --format md|json|csv|html` reads only the store, so a report can
be written long after the run, on another machine, from the SQLite file alone. The
HTML report is one self-contained file with inline SVG charts (no scripts).

Infra-fault trials (errorflow's infrastructure failed: nothing was measured) get their
own column, count only, when a run has any; rates are over the other trials.
"""

from __future__ import annotations

import csv
import html
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict

from errorflow.core.costs import COST_KEYS
from errorflow.runtime.store import StoredRun, get_run, group_runs, load_scores, trial_rows
from errorflow.scoring.score import Outcome
from errorflow.scoring.summary import (
    RATED,
    Amplification,
    Metrics,
    OutcomeCounts,
    PairedOutcomes,
    PerTrialCosts,
    Rate,
    RunSummary,
    amplification,
    paired_outcomes,
    summarize,
)

#: Outcomes with a rate: a column each (count, rate, interval) in every report.
OUTCOMES = [o.value for o in RATED]
#: Counted, never rated: a count column when some run has any.
INFRA_FAULT = Outcome.INFRA_FAULT.value
COLOURS = {
    "success": "#2e7d32",
    "contained": "#f9a825",
    "contaminated": "#c62828",
    "bus_fault": "#616161",
    "infra_fault": "#6a1b9a",
}


class ReportError(LookupError):
    pass


class ReportArm(TypedDict):
    """One run of the report; fault-free baselines are not arms, they give amplification."""

    label: str
    run_id: str
    scenario: str
    seed: int
    trials: int
    propagation: str
    status: str
    outcomes: OutcomeCounts
    metrics: Metrics
    amplification: Amplification | None  # None: no baseline was run
    rejects: dict[str, int]
    trial_outcomes: list[str]  # outcome values in trial order (for paired differences)


class ReportJson(TypedDict):
    """Everything a report shows; this is also the JSON format."""

    id: str
    group_id: str | None  # None: the report of a single run
    arms: list[ReportArm]
    paired: NotRequired[PairedOutcomes]  # explicit − implicit, when both ran


def build(db: Path, ident: str) -> ReportJson:
    """Everything a report shows, as plain data (this is also the JSON format)."""
    runs = group_runs(db, ident)
    group = ident if runs else None
    if not runs:
        run = get_run(db, ident)
        if run is None:
            raise ReportError(f"no run or group {ident!r} in {db} (see `errorflow runs`)")
        runs = [run]
    baselines: dict[str, PerTrialCosts] = {}
    for r in runs:
        label, summary = r["label"] or "", r["summary"]
        if label.endswith(":baseline") and summary:
            baselines[label.removesuffix(":baseline")] = summary["metrics"]["per_trial"]
    arms = []
    for r in runs:
        label = r.get("label") or r["run_id"]
        if not label.endswith(":baseline"):
            arms.append(_arm(db, r, label, baselines.get(label)))
    data: ReportJson = {"id": ident, "group_id": group, "arms": arms}
    by_label = {a["label"]: a["trial_outcomes"] for a in arms}
    if "explicit" in by_label and "implicit" in by_label:
        ex, im = by_label["explicit"], by_label["implicit"]
        if len(ex) == len(im):
            data["paired"] = paired_outcomes(ex, im)
    return data


def _arm(db: Path, run: StoredRun, label: str, baseline: PerTrialCosts | None) -> ReportArm:
    # A run killed before it finished has no summary yet; its trials are stored.
    summary: RunSummary = run.get("summary") or summary_from_trials(db, run["run_id"])
    metrics = summary["metrics"]
    return {
        "label": label,
        "run_id": run["run_id"],
        "scenario": run["scenario"],
        "seed": run["seed"],
        "trials": run["trials"],
        "propagation": run["propagation"],
        "status": run["status"],
        "outcomes": summary["outcomes"],
        "metrics": metrics,
        "amplification": amplification(metrics["per_trial"], baseline) if baseline else None,
        "rejects": run.get("rejects_by_reason", {}),
        "trial_outcomes": [t["outcome"] for t in trial_rows(db, run["run_id"])],
    }


def summary_from_trials(db: Path, run_id: str) -> RunSummary:
    scores = list(load_scores(db, run_id, include_bus_faults=True).values())
    return summarize(scores)


def to_json(data: ReportJson) -> str:
    return json.dumps(data, indent=2)


#: A CSV cell: what csv.DictWriter writes with str() (None as an empty cell).
Cell = str | int | float | None


@dataclass(frozen=True)
class OutcomeCells:
    count: int
    rate: float  # rounded to 4 places, as the CSV has it
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class ArmRow:
    """One arm as a table row: the CSV's columns, the Markdown tables' cells."""

    arm: ReportArm
    outcomes: dict[str, OutcomeCells]
    costs: dict[str, float | None]  # per trial, by cost key (None: not stored)
    amplification: Amplification

    @classmethod
    def of(cls, a: ReportArm) -> ArmRow:
        outcomes = {}
        for o in OUTCOMES:
            r: Rate = a["metrics"]["rates"].get(o, {"rate": 0.0, "ci95": [0.0, 1.0]})
            low, high = r["ci95"]
            outcomes[o] = OutcomeCells(a["outcomes"].get(o, 0), round(r["rate"], 4), low, high)
        per = a["metrics"]["per_trial"]
        costs = {k: per.get(k) for k in COST_KEYS}
        amp = a["amplification"] or {"backend_calls": None, "model_calls": None}
        return cls(a, outcomes, costs, amp)

    @property
    def tokens(self) -> float:
        return (self.costs["input_tokens"] or 0) + (self.costs["output_tokens"] or 0)

    @property
    def infra_faults(self) -> int:
        return self.arm["outcomes"].get(INFRA_FAULT, 0)

    def csv(self, with_infra: bool = False) -> dict[str, Cell]:
        a = self.arm
        row: dict[str, Cell] = {
            "label": a["label"],
            "run_id": a["run_id"],
            "trials": a["trials"],
            "propagation": a["propagation"],
            "status": a["status"],
        }
        for o, cells in self.outcomes.items():
            row[o] = cells.count
            row[f"{o}_rate"] = cells.rate
            row[f"{o}_ci_low"], row[f"{o}_ci_high"] = cells.ci_low, cells.ci_high
        if with_infra:
            row[INFRA_FAULT] = self.infra_faults
        row.update(self.costs)
        row["backend_amplification"] = self.amplification["backend_calls"]
        row["model_amplification"] = self.amplification["model_calls"]
        row["mean_depth"] = a["metrics"]["mean_depth"]
        return row


def any_infra_faults(arms: list[ReportArm]) -> bool:
    return any(a["outcomes"].get(INFRA_FAULT, 0) for a in arms)


def to_csv(data: ReportJson) -> str:
    with_infra = any_infra_faults(data["arms"])
    rows = [ArmRow.of(a).csv(with_infra) for a in data["arms"]]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["label"])
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def _fmt(v: Cell) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def to_markdown(data: ReportJson) -> str:
    arms = data["arms"]
    first = arms[0]
    lines = [
        f"# errorflow report: {data['id']}",
        "",
        f"Scenario **{first['scenario']}**, seed {first['seed']}, {first['trials']} trials"
        f" per run, {len(arms)} run(s).",
        "",
        "## Outcomes",
        "",
    ]
    with_infra = any_infra_faults(arms)
    infra_head = " infra fault (not scored) |" if with_infra else ""
    lines += [
        f"| run | success | contained | contaminated | bus fault |{infra_head} mean depth |",
        "|---|---|---|---|---|" + ("---|" if with_infra else "") + "---|",
    ]
    rows = [ArmRow.of(a) for a in arms]
    for r in rows:
        cells = [
            f"{c.count} ({c.rate:.0%}, CI {c.ci_low:.0%}–{c.ci_high:.0%})"
            for c in r.outcomes.values()
        ]
        if with_infra:
            cells.append(str(r.infra_faults))
        depth = _fmt(r.arm["metrics"]["mean_depth"])
        lines.append(f"| {r.arm['label']} | " + " | ".join(cells) + f" | {depth} |")
    lines += [
        "",
        "Rates with 95 % Wilson intervals"
        + (
            ", over the trials that measured something (an infra fault is a model server "
            "that failed: not scored)."
            if with_infra
            else "."
        ),
        "",
        "## Costs per trial",
        "",
        "| run | backend calls | model calls | tokens | retries | simulated s |"
        " backend × | model × |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        costs, amp = r.costs, r.amplification
        lines.append(
            f"| {r.arm['label']} | {_fmt(costs['backend_calls'])} | "
            f"{_fmt(costs['model_calls'])} | {r.tokens:.0f} | {_fmt(costs['retries'])} | "
            f"{_fmt(costs['sim_seconds'])} | {_fmt(amp['backend_calls'])} | "
            f"{_fmt(amp['model_calls'])} |"
        )
    lines += [
        "",
        "Amplification is against the same scenario with every fault removed, "
        "same seeds (– when no baseline was run).",
    ]
    if "paired" in data:
        lines += ["", "## Paired difference (explicit − implicit, same trials)", ""]
        for metric, d in data["paired"].items():
            lines.append(
                f"- {metric}: {d['diff']:+.1%} (95 % CI {d['low']:+.1%} to "
                f"{d['high']:+.1%}); discordant trials {d['only_a']} vs {d['only_b']}"
                f" of {d['n']}"
            )
    rejects = {k: v for a in arms for k, v in (a["rejects"] or {}).items()}
    if rejects:
        lines += ["", f"Rejected bus messages: {rejects}"]
    return "\n".join(lines) + "\n"


def _bars_svg(arms: list[ReportArm]) -> str:
    """Stacked horizontal bars: the outcome mix of each run."""
    width, bar_h, gap, left = 640, 22, 10, 170
    height = len(arms) * (bar_h + gap) + 30
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="outcomes per run">'
    ]
    shown = OUTCOMES + ([INFRA_FAULT] if any_infra_faults(arms) else [])
    for i, a in enumerate(arms):
        y = i * (bar_h + gap)
        parts.append(f'<text x="0" y="{y + 16}" font-size="13">{html.escape(a["label"])}</text>')
        x = float(left)
        total = max(1, sum(a["outcomes"].get(o, 0) for o in shown))
        for o in shown:
            w = (width - left - 10) * a["outcomes"].get(o, 0) / total
            if w > 0:
                parts.append(
                    f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" '
                    f'fill="{COLOURS[o]}"><title>{o}: {a["outcomes"].get(o, 0)}'
                    f"</title></rect>"
                )
            x += w
    y = len(arms) * (bar_h + gap) + 14
    x = left
    step = min(110, (width - left) // len(shown))  # the legend stays inside the picture
    for o in shown:
        parts.append(
            f'<rect x="{x}" y="{y - 10}" width="10" height="10" fill="{COLOURS[o]}"/>'
            f'<text x="{x + 14}" y="{y}" font-size="12">{o}</text>'
        )
        x += step
    parts.append("</svg>")
    return "".join(parts)


def to_html(data: ReportJson) -> str:
    md = to_markdown(data)
    body = []
    for line in md.splitlines():
        if line.startswith("# "):
            body.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif line.startswith("## "):
            body.append(f"<h2>{html.escape(line[3:])}</h2>")
            if line.startswith("## Outcomes"):
                body.append(_bars_svg(data["arms"]))
        elif line.startswith("|---"):
            continue
        elif line.startswith("| "):
            cells = [c.strip() for c in line.strip("|").split("|")]
            tag = "th" if body and not body[-1].startswith("<tr") else "td"
            row = "".join(f"<{tag}>{html.escape(c).replace('**', '')}</{tag}>" for c in cells)
            body.append(f"<tr>{row}</tr>")
        elif line.startswith("- "):
            body.append(f"<li>{html.escape(line[2:])}</li>")
        elif line:
            body.append(f"<p>{html.escape(line).replace('**', '')}</p>")
    out, in_table = [], False
    for piece in body:
        if piece.startswith("<tr") and not in_table:
            out.append("<table>")
            in_table = True
        if not piece.startswith("<tr") and in_table:
            out.append("</table>")
            in_table = False
        out.append(piece)
    if in_table:
        out.append("</table>")
    style = (
        "body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;color:#222}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;"
        "padding:.3em .6em;text-align:right}td:first-child,th:first-child{text-align:left}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>errorflow report "
        f"{html.escape(data['id'])}</title><style>{style}</style></head><body>"
        + "\n".join(out)
        + "</body></html>\n"
    )


RENDERERS: dict[str, Callable[[ReportJson], str]] = {
    "md": to_markdown,
    "json": to_json,
    "csv": to_csv,
    "html": to_html,
}


def render(db: Path, ident: str, fmt: str) -> str:
    return RENDERERS[fmt](build(db, ident))
