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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict

from errorflow.core.costs import COST_KEYS
from errorflow.core.display import html_text, md_text, signed_pct
from errorflow.core.errors import InputError
from errorflow.reports import charts
from errorflow.reports.blocks import (
    Block,
    Figure,
    Heading,
    Items,
    OutcomeChart,
    Para,
    Strong,
    TableBlock,
    TimelineChart,
    TraceLinks,
)
from errorflow.reports.policy_table import policy_rows
from errorflow.reports.profile_lines import ProfileJson, profile_blocks, stored_profiles
from errorflow.reports.root_cause_blocks import root_cause_blocks, trace_command
from errorflow.reports.service_table import service_rows
from errorflow.reports.sweep_report import SweepReportJson, stored_sweep, sweep_table
from errorflow.reports.timeline import TimelineJson, timeline
from errorflow.reports.timeline_source import run_events
from errorflow.reports.timeline_svg import lane_peak, timeline_svg
from errorflow.reports.timeline_table import HEAD as TIMELINE_HEAD
from errorflow.reports.timeline_table import timeline_rows
from errorflow.scoring.root_cause_summary import RootCauseSummary, summarize_causes
from errorflow.scoring.score import Outcome
from errorflow.scoring.service_load import ServiceJson
from errorflow.scoring.stats import p_value_text
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
from errorflow.store import root_causes
from errorflow.store.readers import (
    StoredRun,
    baseline_runs,
    get_run,
    group_runs,
    load_scores,
    trial_rows,
)
from errorflow.store.trial_store import telling_trial

#: Outcomes with a rate: a column each (count, rate, interval) in every report.
OUTCOMES = [o.value for o in RATED]
#: Counted, never rated: a count column when some run has any.
INFRA_FAULT = Outcome.INFRA_FAULT.value
#: More runs than this (a sweep's cells) get no per-run outcome charts: a heatmap instead.
MAX_CHARTED_ARMS = 8
COLOURS = {
    "success": "#2e7d32",
    "contained": "#f9a825",
    "contaminated": "#c62828",
    "bus_fault": "#616161",
    "infra_fault": "#6a1b9a",
}


class ReportError(InputError, LookupError):
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
    #: Where the failed trials' failures started, who dropped them, which edges carried
    #: contamination (errorflow.scoring.root_cause_summary).
    root_causes: NotRequired[RootCauseSummary]
    #: The trial `errorflow trace` shows first (the first contaminated, else failed one).
    telling_trial: NotRequired[int]
    services: NotRequired[dict[str, ServiceJson]]  # load on each service (when any)
    #: Load on each service and breaker states over run time (errorflow.reports.timeline;
    #: when the run has a service or a breaker moved).
    timeline: NotRequired[TimelineJson]
    #: By agent: the simulated model's profile and where its parameters came from.
    profiles: NotRequired[dict[str, ProfileJson]]


class ReportJson(TypedDict):
    """Everything a report shows; this is also the JSON format."""

    id: str
    group_id: str | None  # None: the report of a single run
    arms: list[ReportArm]
    paired: NotRequired[PairedOutcomes]  # explicit − implicit, when both ran
    sweep: NotRequired[SweepReportJson]  # a sweep's measures (its `sweep.measures`)


def build(db: Path, ident: str) -> ReportJson:
    """Everything a report shows, as plain data (this is also the JSON format)."""
    runs = group_runs(db, ident)
    group = ident if runs else None
    if not runs:
        run = get_run(db, ident)
        if run is None:
            raise ReportError(f"no run or group {ident!r} in {db} (see `errorflow runs`)")
        runs = [run]
    baselines = baseline_runs(runs)
    arms = []
    for r in runs:
        label = r.get("label") or r["run_id"]
        if not label.endswith(":baseline"):
            base = baselines.get(label)
            summary = base["summary"] if base is not None else None
            arms.append(_arm(db, r, label, summary["metrics"]["per_trial"] if summary else None))
    _add_timelines(db, runs, arms, baselines)
    data: ReportJson = {"id": ident, "group_id": group, "arms": arms}
    sweep = stored_sweep(runs, {a["label"]: a["outcomes"] for a in arms}) if group else None
    if sweep is not None:
        data["sweep"] = sweep
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
    arm: ReportArm = {
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
    if "services" in summary:
        arm["services"] = summary["services"]
    arm["root_causes"] = summarize_causes(root_causes.load(db, run["run_id"]).values())
    profiles = stored_profiles(run["scenario_json"])
    if profiles:
        arm["profiles"] = profiles
    if arm["root_causes"]["failed"] and (n := telling_trial(db, run["run_id"])) is not None:
        arm["telling_trial"] = n
    return arm


def _add_timelines(
    db: Path, runs: list[StoredRun], arms: list[ReportArm], baselines: dict[str, StoredRun]
) -> None:
    """Each arm's timeline against its baseline's, all on one axis (the longest run's)."""
    by_label = {r.get("label") or r["run_id"]: r for r in runs}
    loaded = {}
    for a in arms:
        events = run_events(db, by_label[a["label"]])
        base_run = baselines.get(a["label"])
        if events is not None:
            loaded[a["label"]] = (events, run_events(db, base_run) if base_run else None)
    span = max((max(e.last_at, b.last_at if b else 0.0) for e, b in loaded.values()), default=0.0)
    for a in arms:
        if a["label"] in loaded:
            tl = timeline(*loaded[a["label"]], span_s=span)
            if tl is not None:
                a["timeline"] = tl


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
    rate: float | None  # rounded to 4 places, as the CSV has it (None: none measured)
    ci_low: float | None
    ci_high: float | None

    def text(self) -> str:
        if self.rate is None or self.ci_low is None or self.ci_high is None:
            return f"{self.count} (n/a: no trial measured)"
        return f"{self.count} ({self.rate:.0%}, CI {self.ci_low:.0%}–{self.ci_high:.0%})"


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
            r: Rate = a["metrics"]["rates"].get(o, {"rate": None, "ci95": None})
            low, high = r["ci95"] or (None, None)
            rate = None if r["rate"] is None else round(r["rate"], 4)
            outcomes[o] = OutcomeCells(a["outcomes"].get(o, 0), rate, low, high)
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


# -- the document: what the Markdown and the HTML report both say ------------------------
# Built as plain text, never as markup, so that each format escapes every string the
# same way: a label, a scenario name or an id from the store is text, whatever it holds.


def _rated(arm: ReportArm) -> dict[str, tuple[float, float, float]]:
    """The arm's rates that have a value (none where no trial measured anything), with
    their intervals."""
    out = {}
    for o, r in arm["metrics"]["rates"].items():
        if r["rate"] is not None and r["ci95"] is not None:
            low, high = r["ci95"]
            out[o] = (r["rate"], low, high)
    return out


def _outcome_blocks(arms: list[ReportArm], rows: list[ArmRow]) -> list[Block]:
    with_infra = any_infra_faults(arms)
    head = ["run", "success", "contained", "contaminated", "bus fault"]
    head += ["infra fault (not scored)"] if with_infra else []
    cells = []
    for r in rows:
        row = [r.arm["label"]]
        row += [c.text() for c in r.outcomes.values()]
        row += [str(r.infra_faults)] if with_infra else []
        cells.append([*row, _fmt(r.arm["metrics"]["mean_depth"])])
    over = (
        ", over the trials that measured something (an infra fault is a model server, a "
        "tool's server or an agent's process that failed: not scored)."
    )
    if len(arms) > MAX_CHARTED_ARMS:  # a sweep: its heatmap shows the cells
        folded = f"The outcomes of all {len(arms)} runs"
        return [Heading(2, "Outcomes"), TableBlock([*head, "mean depth"], cells, folded=folded)]
    whiskers = [(a["label"], _rated(a)) for a in arms]
    return [
        Heading(2, "Outcomes"),
        OutcomeChart(),
        TableBlock([*head, "mean depth"], cells),
        Figure(charts.rate_whiskers(whiskers, COLOURS)),
        Para(("Rates with 95 % Wilson intervals" + (over if with_infra else "."),)),
    ]


def _cost_blocks(rows: list[ArmRow]) -> list[Block]:
    head = ["run", "backend calls", "model calls", "tokens", "retries", "simulated s"]
    cells = []
    for r in rows:
        costs, amp = r.costs, r.amplification
        cells.append(
            [r.arm["label"], _fmt(costs["backend_calls"]), _fmt(costs["model_calls"]),
             f"{r.tokens:.0f}", _fmt(costs["retries"]), _fmt(costs["sim_seconds"]),
             _fmt(amp["backend_calls"]), _fmt(amp["model_calls"])]
        )  # fmt: skip
    return [
        Heading(2, "Costs per trial"),
        TableBlock([*head, "backend ×", "model ×"], cells),
        Para(("Amplification is against the same scenario with every fault removed, "
              "same seeds (– when no baseline was run).",)),
    ]  # fmt: skip


def _service_blocks(arms: list[ReportArm]) -> list[Block]:
    """The load on each service, per run (when the runs had services)."""
    head = ["run", "service", "calls/trial", "answered", "refused", "peak/s", "outages"]
    cells = [[a["label"], *row] for a in arms for row in service_rows(a.get("services") or {})]
    if not cells:
        return []
    return [Heading(2, "Services"), TableBlock(head, cells)]


def _timeline_blocks(arms: list[ReportArm]) -> list[Block]:
    """Load and breaker states over run time, per run (a chart in HTML, a table in both)."""
    shown = [a for a in arms if "timeline" in a]
    if not shown:
        return [TimelineChart("", None)]
    blocks: list[Block] = [Heading(2, "Timeline")]
    blocks += [TimelineChart(a["label"], a["timeline"]) for a in shown]
    cells = [[a["label"], *row] for a in shown for row in timeline_rows(a["timeline"])]
    return [
        *blocks,
        TableBlock(["run", *TIMELINE_HEAD], cells, folded="The charts' figures as a table"),
        Para(("Calls that reached each service over run time (answered, refused with 429, "
              "failed with a 5xx or a timeout), against the fault-free baseline's on the same "
              "seconds when it ran; calls shed before they went out (an open circuit, the "
              "client's limiter or bulkhead); whether the service was down; and the states "
              "other than closed each breaker was in (×N: in N trials, for a breaker that "
              "lives one trial).",)),
    ]  # fmt: skip


def _policy_blocks(arms: list[ReportArm]) -> list[Block]:
    """Every policy decision per agent, per run (when the runs made any)."""
    head = ["run", "agent", "retries", "breaker o/h/c", "refused", "guard blocks", "loop stops"]
    cells = [
        [a["label"], *row] for a in arms for row in policy_rows(a["metrics"].get("policy") or {})
    ]
    if not cells:
        return []
    return [
        Heading(2, "Policy decisions"),
        TableBlock(head, cells),
        Para(("Totals over the measured trials: retries (and how many ran out), the backoff "
              "they waited, breaker transitions (open / half-open / closed), calls refused "
              "before they ran, guard blocks and loop stops by kind.",)),
    ]  # fmt: skip


def _sweep_blocks(data: ReportJson) -> list[Block]:
    """A sweep's heatmap and measures, first: the cells are what a sweep is about."""
    if "sweep" not in data:
        return []
    head, cells, notes = sweep_table(data["sweep"])
    sweep = data["sweep"]
    axes = [(a["name"], a["values"]) for a in sweep["axes"]]
    heatmap = charts.sweep_heatmap(axes, sweep["counts"], sweep["measures"]["published"])
    return [
        Heading(2, "Sweep measures"),
        Figure(heatmap),
        TableBlock(head, cells),
        Para(("; ".join(notes),)),
    ]


def document(data: ReportJson) -> list[Block]:
    """The report's content, once, for every format that shows it to a reader."""
    arms = data["arms"]
    first = arms[0]
    rows = [ArmRow.of(a) for a in arms]
    blocks: list[Block] = [
        Heading(1, f"errorflow report: {data['id']}"),
        Para(("Scenario ", Strong(first["scenario"]), f", seed {first['seed']}, "
              f"{first['trials']} trials per run, {len(arms)} run(s).")),
        *_sweep_blocks(data),
        *_outcome_blocks(arms, rows),
        *_cost_blocks(rows),
        *_policy_blocks(arms),
        *_service_blocks(arms),
        *_timeline_blocks(arms),
        *root_cause_blocks(arms, COLOURS["contaminated"]),
        *profile_blocks(arms[0].get("profiles") or {}),
    ]  # fmt: skip
    if "paired" in data:
        items = [
            f"{metric}: {signed_pct(d['diff'], 1)} (95 % CI {signed_pct(d['low'], 1)} to "
            f"{signed_pct(d['high'], 1)}); "
            f"discordant trials {d['only_a']} vs {d['only_b']} of {d['n']}; "
            f"{p_value_text(d.get('p'))}"
            for metric, d in data["paired"].items()
        ]
        forest = charts.forest(list(data["paired"].items()), "explicit − implicit, same trials")
        blocks += [
            Heading(2, "Paired difference (explicit − implicit, same trials)"),
            Figure(forest),
            Items(items),
        ]
    rejects = {k: v for a in arms for k, v in (a["rejects"] or {}).items()}
    if rejects:
        blocks.append(Para((f"Rejected bus messages: {rejects}",)))
    return blocks


def _md_block(block: Block) -> str | None:
    match block:
        case Heading(level=level, text=text):
            return "#" * level + " " + md_text(text)
        case Para(spans=spans):
            return "".join(
                f"**{md_text(s.text)}**" if isinstance(s, Strong) else md_text(s, limit=None)
                for s in spans
            )
        case TableBlock(head=head, rows=rows):
            lines = [_md_row(head), "|" + "---|" * len(head)]
            return "\n".join(lines + [_md_row(r) for r in rows])
        case Items(items=items):
            return "\n".join(f"- {md_text(item)}" for item in items)
        case TraceLinks(trials=trials):
            return "\n".join(
                f"- {md_text(label)}: `{md_text(trace_command(run_id, n))}`"
                for label, run_id, n in trials
            )
    return None  # the chart: HTML only


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(md_text(c) for c in cells) + " |"


def to_markdown(data: ReportJson) -> str:
    shown = (_md_block(b) for b in document(data))
    return "\n\n".join(s for s in shown if s is not None) + "\n"


def _html_block(
    block: Block, arms: list[ReportArm], links: Mapping[str, str] | None = None
) -> list[str]:
    match block:
        case Heading(level=level, text=text):
            return [f"<h{level}>{html_text(text)}</h{level}>"]
        case Para(spans=spans):
            text = "".join(s.text if isinstance(s, Strong) else s for s in spans)
            return [f"<p>{html_text(text, limit=None)}</p>"]
        case TableBlock(head=head, rows=rows, folded=folded):
            trs = [_html_row("th", head), *(_html_row("td", r) for r in rows)]
            if folded is not None:
                summary = f"<details><summary>{html_text(folded)}</summary>"
                return [summary, "<table>", *trs, "</table>", "</details>"]
            return ["<table>", *trs, "</table>"]
        case Items(items=items):
            return [f"<li>{html_text(item)}</li>" for item in items]
        case OutcomeChart():
            shown = OUTCOMES + ([INFRA_FAULT] if any_infra_faults(arms) else [])
            bars = [(a["label"], a["outcomes"]) for a in arms]
            return [charts.outcome_bars(bars, shown, COLOURS)]
        case Figure(svg=svg):
            return [svg]
        case TraceLinks(trials=trials):
            return [_trace_link(label, run_id, n, (links or {}).get(run_id))
                    for label, run_id, n in trials]  # fmt: skip
        case TimelineChart(timeline=None):
            return [
                "<p>No timeline: no run here has a service or a breaker that changed state.</p>"
            ]
        case TimelineChart(label=label, timeline=tl) if tl is not None:
            caption = f"<h3>{html_text(label)}</h3>" if len(arms) > 1 else ""
            return [caption + timeline_svg(tl, f"timeline of {label}", _peaks(arms))]
    return []


def _trace_link(label: str, run_id: str, trial: int, href: str | None) -> str:
    what = f"{label}: trial {trial} traced whole"
    if href is not None:
        return f'<li><a href="{html.escape(href)}">{html_text(what)}</a></li>'
    return f"<li>{html_text(what)}: <code>{html_text(trace_command(run_id, trial))}</code></li>"


def _peaks(arms: list[ReportArm]) -> dict[str, int]:
    """Each service's highest bar over every run: the runs' charts share its scale."""
    peaks: dict[str, int] = {}
    for tl in (a["timeline"] for a in arms if "timeline" in a):
        for name, s in tl["services"].items():
            peaks[name] = max(peaks.get(name, 1), lane_peak(s))
    return peaks


def _html_row(tag: str, cells: list[str]) -> str:
    return "<tr>" + "".join(f"<{tag}>{html_text(c)}</{tag}>" for c in cells) + "</tr>"


def to_html(data: ReportJson, links: Mapping[str, str] | None = None) -> str:
    """The HTML report; `links`: by run id, the page of its telling trial (written beside
    the report; errorflow.reports.propagation.trace_page), else the command that writes it."""
    out = [piece for b in document(data) for piece in _html_block(b, data["arms"], links)]
    style = (
        "body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;color:#222}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;"
        "padding:.3em .6em;text-align:right}td:first-child,th:first-child{text-align:left}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>errorflow report "
        f"{html_text(data['id'])}</title><style>{style}</style></head><body>"
        + "\n".join(out)
        + "</body></html>\n"
    )


RENDERERS: dict[str, Callable[[ReportJson], str]] = {
    "md": to_markdown,
    "json": to_json,
    "csv": to_csv,
    "html": to_html,
}


def render(db: Path, ident: str, fmt: str, links: Mapping[str, str] | None = None) -> str:
    if fmt == "html":
        return to_html(build(db, ident), links)
    return RENDERERS[fmt](build(db, ident))
