"""A small Python API for notebooks and scripts: load, override, run, read the results.

    from errorflow import api

    scenario = api.load("support-pipeline")            # a bundled name, a path or a dict
    scenario = api.override(scenario, {"trials": 30})  # dotted paths, as `--set` takes
    result = api.run(scenario, propagation="implicit") # in-process; broker="mqtt://..."
    result.records()                                   # one plain dict per trial
    print(result.report())                             # what `errorflow run` prints

Everything goes through the same validation as the CLI (a bad dict raises
`ScenarioError` with one problem per line), the same runner and the same scorer; only
the bus defaults to an in-process one, and the store to a temporary file, so a
notebook needs no broker and leaves nothing behind unless `db=` names a file.
"""

from __future__ import annotations

import asyncio
import io
import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from errorflow.bus.transport import InProcessBus
from errorflow.bus.url import parse_broker_url
from errorflow.reports.tables import print_run
from errorflow.runtime import workers as worker_processes
from errorflow.runtime.runner import RunOptions, RunResult
from errorflow.scenario.bundled import resolve
from errorflow.scenario.loader import ScenarioError, validate_data
from errorflow.scenario.loader import load as load_file
from errorflow.scenario.model import Scenario
from errorflow.scenario.overrides import apply
from errorflow.scoring.summary import RunSummary

__all__ = ["Result", "Scenario", "ScenarioError", "load", "override", "run", "run_async"]


def load_scenario(source: str | Path | Mapping[str, Any]) -> Scenario:
    """A scenario from a bundled name, a file path or a plain dict (validated as a
    file would be)."""
    if isinstance(source, Mapping):
        return validate_data(dict(source), "<dict>")
    return load_file(resolve(str(source)))


def override(scenario: Scenario, settings: Mapping[str, object]) -> Scenario:
    """The scenario with dotted-path fields replaced (`{"agents.writer.model.profile":
    "frontier"}`), validated again."""
    return apply(scenario, settings)


@dataclass
class Result:
    """One run: per-trial records, the summary the CLI prints, the run's raw result."""

    raw: RunResult

    @property
    def run_id(self) -> str:
        return self.raw.run_id

    @property
    def summary(self) -> RunSummary:
        return self.raw.summary

    @property
    def outcomes(self) -> dict[str, int]:
        return self.raw.outcomes

    def records(self) -> list[dict[str, object]]:
        """One flat dict per trial (ready for `pandas.DataFrame(result.records())`)."""
        out: list[dict[str, object]] = []
        for score in sorted(self.raw.scores, key=lambda s: s.trial):
            row: dict[str, object] = {
                "run_id": self.raw.run_id,
                "scenario": self.raw.scenario,
                "propagation": self.raw.propagation,
                "seed": self.raw.seed,
                "trial": score.trial,
                "outcome": score.outcome.value,
                "depth": score.depth,
                "reason": score.reason,
            }
            row.update(score.costs.to_wire())
            row["contaminated_agents"] = sorted(
                {lb.sender for lb in score.labels if lb.label.value == "contaminated"}
            )
            out.append(row)
        return out

    def report(self, width: int = 100) -> str:
        """The text `errorflow run` prints for this run."""
        console = Console(record=True, width=width, file=io.StringIO(), color_system=None)
        print_run(console, self.raw.to_json())
        return console.export_text()


async def run_async(
    scenario: Scenario,
    *,
    trials: int | None = None,
    seed: int | None = None,
    propagation: str | None = None,
    broker: str | None = None,
    db: str | Path | None = None,
    workers: worker_processes.WorkerCount = 1,
) -> Result:
    """Run a scenario (in-process unless `broker` names one: `mqtt://host:port`, or
    `embedded` for the built-in broker) and score every trial; `workers`: spread the
    trials over that many processes (`"auto"`: every core for a large run), with the
    outcomes one process gives (they are spawned: a script that uses them runs its work
    under `if __name__ == "__main__":`)."""
    with tempfile.TemporaryDirectory(prefix="errorflow-") as tmp:
        options = RunOptions(
            trials=trials,
            seed=seed,
            propagation=propagation,
            db_path=Path(db) if db is not None else Path(tmp) / "errorflow.db",
            bus=InProcessBus() if broker is None else None,
            broker=parse_broker_url(broker) if broker not in (None, "embedded") else None,
        )
        return Result(await worker_processes.run(scenario, options, workers))


def run(scenario: Scenario, **options: Any) -> Result:
    """`run_async`, from code that is not async (a script, or a notebook cell: a
    running event loop is left alone, the run gets a loop of its own in a thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run_async(scenario, **options))
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run_async(scenario, **options)).result()


load = load_scenario  # the name the examples use: `api.load(...)`
