"""The exports built from trial traces (errorflow.cli.commands.export registers them):

- `who-when`: each failed trial as a Who&When record (errorflow.reports.who_when), one
  JSON file per trial in `-o DIR` (a folder per run when the id names a group), or
  JSON Lines on stdout;
- `otlp-json`: one OTLP/JSON trace request per trial, a line each (the OTLP file
  format), to `-o FILE` or stdout;
- `--otlp URL`: the same spans sent to an OTLP/HTTP receiver.

Trials are read from the store a slice at a time, in order.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from types import ModuleType
from typing import Any

from errorflow.cli.errors import UsageError
from errorflow.core.redact import redact_obj
from errorflow.reports.who_when import record
from errorflow.scenario.problems import ScenarioError
from errorflow.scenario.spec.behaviour import behaviour_of
from errorflow.scenario.stored import load_stored
from errorflow.scoring.score import Truth
from errorflow.scoring.trial_trace import TrialTrace
from errorflow.store.opening import connect_ro
from errorflow.store.readers import StoredRun
from errorflow.store.trial_store import (
    read_range,
    run_meta,
    stored_trials,
    trace_of,
)

CHUNK = 200

OTEL_MISSING = (
    "the OpenTelemetry export needs the `otel` extra: pip install 'errorflow[otel]' "
    "(opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http)"
)


def traces(db: Path, run: StoredRun) -> Iterator[TrialTrace]:
    """Every stored trial of a run, traced, in trial order."""
    with connect_ro(db) as conn:
        meta = run_meta(conn, run["run_id"])
        trials = stored_trials(conn, run["run_id"])
        if meta is None:
            return
        for i in range(0, len(trials), CHUNK):
            part = trials[i : i + CHUNK]
            rows = read_range(conn, meta.run_id, part[0], part[-1])
            for t in part:
                if t in rows:
                    yield trace_of(meta, rows[t])


@dataclass(frozen=True)
class ScenarioFacts:
    truth: dict[str, Any]  # each need's true value, as the scorer has it (redacted)
    prompts: dict[str, str]  # each agent's system prompt
    note: str | None  # why the truth is missing, if it is


def scenario_facts(run: StoredRun) -> ScenarioFacts:
    """What the stored scenario says about the truth and the agents' prompts."""
    data = json.loads(run["scenario_json"])
    prompts = {}
    for name, spec in (data.get("agents") or {}).items():
        behaviour = behaviour_of(spec.get("role", ""), spec.get("behaviour"))
        prompts[str(name)] = str(spec.get("instructions") or behaviour.instructions)
    if run["truth"] is not None:  # kept with the run: the stored scenario may lack its code
        return ScenarioFacts(dict(run["truth"]), prompts, None)
    try:
        truth = dict(redact_obj(Truth(load_stored(run["scenario_json"], run["run_id"])).values))
    except (ScenarioError, OSError, ValueError) as exc:
        return ScenarioFacts({}, prompts, f"ground truth not computed: {str(exc)[:200]}")
    return ScenarioFacts(truth, prompts, None)


def who_when_records(db: Path, run: StoredRun) -> Iterator[tuple[int, dict[str, Any]]]:
    facts = scenario_facts(run)
    for t in traces(db, run):
        if t.root_cause is not None and t.root_cause.primary is not None:
            rec = record(t, facts.truth, facts.prompts)
            if facts.note:
                rec["errorflow"]["note"] = facts.note
            yield t.trial, rec


def who_when_jsonl(db: Path, runs: Sequence[StoredRun]) -> str:
    return "".join(
        json.dumps(rec, ensure_ascii=False) + "\n"
        for run in runs
        for _, rec in who_when_records(db, run)
    )


def save_who_when(db: Path, runs: Sequence[StoredRun], out: Path) -> str:
    """One `TRIAL.json` per failed trial in `out` (`out/RUN_ID/` per run of a group)."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} is a file; the who-when export writes a directory", where="-o")
    written = 0
    for run in runs:
        folder = out / run["run_id"] if len(runs) > 1 else out
        folder.mkdir(parents=True, exist_ok=True)
        for trial, rec in who_when_records(db, run):
            text = json.dumps(rec, indent=2, ensure_ascii=False) + "\n"
            (folder / f"{trial}.json").write_text(text, encoding="utf-8")
            written += 1
    return f"wrote {written} failed trial(s) in the Who&When layout to {out}"


def otlp_module() -> ModuleType:
    """errorflow.reports.otlp, whose imports are the `otel` extra's."""
    try:
        return importlib.import_module("errorflow.reports.otlp")
    except ImportError:
        raise UsageError(OTEL_MISSING, where="--otlp / --format otlp-json") from None


def _spans(
    db: Path, runs: Sequence[StoredRun], counted: list[int], clock: str = "wall"
) -> Iterator[list[Any]]:
    """Each trial's spans, run by run (`counted` gets one entry per trial); `clock`: span
    times from the wall clock or the simulated one (errorflow.reports.otlp)."""
    otlp = otlp_module()
    for run in runs:
        models = otlp.agent_models(run["scenario_json"])
        resource = otlp.run_resource(run["run_id"], run["scenario"])
        for t in traces(db, run):
            counted.append(t.trial)
            yield otlp.trial_spans(t, models, resource, clock)


def otlp_json_lines(db: Path, runs: Sequence[StoredRun], clock: str = "wall") -> str:
    otlp = otlp_module()
    return "".join(
        json.dumps(otlp.otlp_json(spans), ensure_ascii=False) + "\n"
        for spans in _spans(db, runs, [], clock)
    )


def send_otlp(db: Path, runs: Sequence[StoredRun], endpoint: str, clock: str = "wall") -> str:
    otlp = otlp_module()
    trials: list[int] = []
    sent = otlp.send(chain.from_iterable(_spans(db, runs, trials, clock)), endpoint)
    return f"sent {sent} spans of {len(trials)} trial(s) to {endpoint}"
