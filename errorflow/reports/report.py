"""Reports of stored runs: one run, or a group (a paired comparison or a sweep).

`errorflow report ID --format md|json|csv|html` reads only the store, so a report can
be written long after the run, on another machine, from the SQLite file alone. The
HTML report is one self-contained file with inline SVG charts (no scripts).
"""

from __future__ import annotations

import csv
import html
import io
import json
from pathlib import Path
from typing import Any

from errorflow.runtime.store import get_run, group_runs, trial_rows
from errorflow.scoring.score import Outcome
from errorflow.scoring.stats import paired_difference
from errorflow.scoring.summary import summarize

OUTCOMES = [o.value for o in Outcome]
COLOURS = {
    "success": "#2e7d32",
    "contained": "#f9a825",
    "contaminated": "#c62828",
    "bus_fault": "#616161",
}


class ReportError(LookupError):
    pass


def build(db: Path, ident: str) -> dict[str, Any]:
    """Everything a report shows, as plain data (this is also the JSON format)."""
    runs = group_runs(db, ident)
    group = ident if runs else None
    if not runs:
        run = get_run(db, ident)
        if run is None:
            raise ReportError(f"no run or group {ident!r} in {db} (see `errorflow runs`)")
        runs = [run]
    baselines = {
        r["label"].removesuffix(":baseline"): r
        for r in runs
        if (r.get("label") or "").endswith(":baseline")
    }
    arms = []
    for r in runs:
        label = r.get("label") or r["run_id"]
        if label.endswith(":baseline"):
            continue
        # A run killed before it finished has no summary yet; its trials are stored.
        summary = r.get("summary") or summary_from_trials(db, r["run_id"])
        metrics = summary.get("metrics", {})
        base = baselines.get(label)
        amplification = None
        if base and base.get("summary"):
            bper = base["summary"]["metrics"]["per_trial"]
            per = metrics.get("per_trial", {})
            amplification = {
                k: (round(per[k] / bper[k], 4) if bper.get(k) else None)
                for k in ("backend_calls", "model_calls")
            }
        arms.append(
            {
                "label": label,
                "run_id": r["run_id"],
                "scenario": r["scenario"],
                "seed": r["seed"],
                "trials": r["trials"],
                "propagation": r["propagation"],
                "status": r["status"],
                "outcomes": summary.get("outcomes", {}),
                "metrics": metrics,
                "amplification": amplification,
                "rejects": r.get("rejects_by_reason", {}),
                "trial_outcomes": [t["outcome"] for t in trial_rows(db, r["run_id"])],
            }
        )
    data: dict[str, Any] = {"id": ident, "group_id": group, "arms": arms}
    labels = [a["label"] for a in arms]
    if "explicit" in labels and "implicit" in labels:
        ex = next(a for a in arms if a["label"] == "explicit")["trial_outcomes"]
        im = next(a for a in arms if a["label"] == "implicit")["trial_outcomes"]
        if len(ex) == len(im):
            data["paired"] = {
                o: paired_difference([x == o for x in ex], [y == o for y in im])
                for o in ("success", "contaminated")
            }
    return data


def summary_from_trials(db: Path, run_id: str) -> dict[str, Any]:
    from errorflow.runtime.store import load_scores

    scores = list(load_scores(db, run_id, include_bus_faults=True).values())
    return summarize(scores)


def to_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2)


def _row(a: dict[str, Any]) -> dict[str, Any]:
    rates = a["metrics"].get("rates", {})
    per = a["metrics"].get("per_trial", {})
    row: dict[str, Any] = {
        "label": a["label"],
        "run_id": a["run_id"],
        "trials": a["trials"],
        "propagation": a["propagation"],
        "status": a["status"],
    }
    for o in OUTCOMES:
        row[o] = a["outcomes"].get(o, 0)
        r = rates.get(o, {"rate": 0.0, "ci95": [0.0, 1.0]})
        row[f"{o}_rate"] = round(r["rate"], 4)
        row[f"{o}_ci_low"], row[f"{o}_ci_high"] = r["ci95"]
    for k in (
        "backend_calls",
        "model_calls",
        "input_tokens",
        "output_tokens",
        "retries",
        "sim_seconds",
    ):
        row[k] = per.get(k)
    amp = a.get("amplification") or {}
    row["backend_amplification"] = amp.get("backend_calls")
    row["model_amplification"] = amp.get("model_calls")
    row["mean_depth"] = a["metrics"].get("mean_depth")
    return row


def to_csv(data: dict[str, Any]) -> str:
    rows = [_row(a) for a in data["arms"]]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["label"])
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def to_markdown(data: dict[str, Any]) -> str:
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
        "| run | success | contained | contaminated | bus fault | mean depth |",
        "|---|---|---|---|---|---|",
    ]
    for a in arms:
        r = _row(a)
        cells = [
            f"{r[o]} ({r[f'{o}_rate']:.0%}, CI {r[f'{o}_ci_low']:.0%}–{r[f'{o}_ci_high']:.0%})"
            for o in OUTCOMES
        ]
        lines.append(f"| {a['label']} | " + " | ".join(cells) + f" | {_fmt(r['mean_depth'])} |")
    lines += [
        "",
        "Rates with 95 % Wilson intervals.",
        "",
        "## Costs per trial",
        "",
        "| run | backend calls | model calls | tokens | retries | simulated s |"
        " backend × | model × |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for a in arms:
        r = _row(a)
        tokens = (r["input_tokens"] or 0) + (r["output_tokens"] or 0)
        lines.append(
            f"| {a['label']} | {_fmt(r['backend_calls'])} | {_fmt(r['model_calls'])} | "
            f"{tokens:.0f} | {_fmt(r['retries'])} | {_fmt(r['sim_seconds'])} | "
            f"{_fmt(r['backend_amplification'])} | {_fmt(r['model_amplification'])} |"
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
    rejects = {k: v for a in arms for k, v in (a.get("rejects") or {}).items()}
    if rejects:
        lines += ["", f"Rejected bus messages: {rejects}"]
    return "\n".join(lines) + "\n"


def _bars_svg(arms: list[dict[str, Any]]) -> str:
    """Stacked horizontal bars: the outcome mix of each run."""
    width, bar_h, gap, left = 640, 22, 10, 170
    height = len(arms) * (bar_h + gap) + 30
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="outcomes per run">'
    ]
    for i, a in enumerate(arms):
        y = i * (bar_h + gap)
        parts.append(f'<text x="0" y="{y + 16}" font-size="13">{html.escape(a["label"])}</text>')
        x = float(left)
        total = max(1, sum(a["outcomes"].get(o, 0) for o in OUTCOMES))
        for o in OUTCOMES:
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
    for o in OUTCOMES:
        parts.append(
            f'<rect x="{x}" y="{y - 10}" width="10" height="10" fill="{COLOURS[o]}"/>'
            f'<text x="{x + 14}" y="{y}" font-size="12">{o}</text>'
        )
        x += 110
    parts.append("</svg>")
    return "".join(parts)


def to_html(data: dict[str, Any]) -> str:
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


RENDERERS = {"md": to_markdown, "json": to_json, "csv": to_csv, "html": to_html}


def render(db: Path, ident: str, fmt: str) -> str:
    return RENDERERS[fmt](build(db, ident))
