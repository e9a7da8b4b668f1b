"""`errorflow trace RUN_ID --format html`: one trial as a self-contained page (no
scripts, no links out): its propagation graph, then the text `errorflow trace` prints
(root cause, provenance tree, timeline), with each message's label coloured."""

from __future__ import annotations

from errorflow.core.display import html_text
from errorflow.reports.propagation.graph import propagation_graph
from errorflow.reports.trace_view import MARKS, trace_lines
from errorflow.scoring.root_cause_summary import summarize_causes
from errorflow.scoring.trial_trace import TrialTrace

#: Wide enough that a message's line rarely wraps in a browser window.
WIDTH = 110

COLOURS = {"contaminated": "#c62828", "contained": "#ef6c00", "clean": "#2e7d32"}
STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:72em;margin:2em auto;padding:0 1em;color:#222}"
    "pre{font:13px/1.45 ui-monospace,monospace;background:#fafafa;border:1px solid #ddd;"
    "padding:1em;overflow-x:auto}"
    + "".join(f".{k}{{color:{v};font-weight:600}}" for k, v in COLOURS.items())
)


def trace_file_name(run_id: str, trial: int) -> str:
    """The file a report links to for this trial (beside the report)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)
    return f"trace-{safe}-t{trial}.html"


def _line(line: str) -> str:
    """A line of the trace, escaped, with its label mark coloured."""
    text = html_text(line, limit=None)
    for label, mark in MARKS.items():
        if mark in text:
            return text.replace(mark, f'<span class="{label}">{mark}</span>', 1)
    return text


def trace_html(trace: TrialTrace) -> str:
    title = f"errorflow trace: trial {trace.trial} of {trace.run_id}"
    parts = [f"<h1>{html_text(title)}</h1>"]
    outcome = trace.outcome or "not scored"
    parts.append(
        f"<p>Scenario <strong>{html_text(trace.scenario)}</strong>, {html_text(trace.propagation)}"
        f' propagation: <span class="{html_text(outcome)}">{html_text(outcome)}</span></p>'
    )
    if trace.root_cause is not None:
        graph = propagation_graph(summarize_causes([trace.root_cause]), "propagation graph")
        if graph:
            parts += ["<h2>How contamination travelled</h2>", graph]
    parts += ["<h2>The trial</h2>", "<pre>"]
    parts.append("\n".join(_line(line) for line in trace_lines(trace, WIDTH)))
    parts.append("</pre>")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html_text(title)}</title>"
        f"<style>{STYLE}</style></head><body>" + "\n".join(parts) + "</body></html>\n"
    )
