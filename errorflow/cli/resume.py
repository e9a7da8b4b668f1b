"""`run --resume ID`: the scenario of an interrupted run, exactly as it ran; and the exact
command that resumes a run, printed wherever a run is left interrupted (Ctrl-C, a store
that failed a write, `errorflow show`)."""

from __future__ import annotations

import argparse
import shlex
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from errorflow.cli.errors import UsageError, db_option, id_problem
from errorflow.cli.scenario_input import configure, folder_of, load_ref, parse_sets
from errorflow.core.redact import redact
from errorflow.scenario.bundled import bundled
from errorflow.scenario.loader import ScenarioError, load_json
from errorflow.scenario.overrides import without_faults
from errorflow.scenario.run_plan import RunSettings
from errorflow.scenario.spec.identity import sha
from errorflow.scenario.spec.model import Scenario
from errorflow.store.readers import StoredRun, get_run, group_runs
from errorflow.store.run_ids import IdLookupError, resolve_id


@dataclass(frozen=True)
class Source:
    """A command's scenario argument and `--set` options, as given: what resuming a run
    whose stored scenario was redacted (it held a secret) must be given again."""

    scenario: str | None = None
    sets: tuple[str, ...] = ()

    @classmethod
    def of(cls, args: argparse.Namespace) -> Source:
        return cls(getattr(args, "scenario", None), tuple(getattr(args, "set", None) or ()))


def resume_command(run_id: str, db: str, source: Source | None = None) -> str:
    """The command that resumes `run_id`, exactly: `--resume ID` alone when the store
    can give back the scenario (held exactly, or the bundled scenario of its name is the
    one); otherwise with the scenario the run came from (`source`'s, or SCENARIO when
    this command does not know it) and its `--set` options, as given (a `--set` holding
    a secret is shown redacted, as everything this process prints)."""
    tail = f"--resume {shlex.quote(run_id)}{db_option(db)}"
    run = get_run(Path(db), run_id) if Path(db).exists() else None
    if run is None or _store_suffices(run):
        return f"errorflow run {tail}"
    if source is None or source.scenario is None:
        return f"errorflow run SCENARIO {tail} (SCENARIO: the file the run came from)"
    sets = [_shown_set(spec) for spec in source.sets]
    words = [shlex.quote(source.scenario), *(f"--set {shlex.quote(spec)}" for spec in sets)]
    said = " (give the secret --set values again)" if sets != list(source.sets) else ""
    return f"errorflow run {' '.join(words)} {tail}{said}"


def _shown_set(spec: str) -> str:
    """A `--set` as given, or redacted if it holds a secret (a path in it is shown)."""
    redacted = redact(spec)
    return redacted if "[REDACTED" in redacted else spec


def _store_suffices(run: StoredRun) -> bool:
    """`run --resume ID` alone finds the scenario (`resumable`'s rule)."""
    if run["scenario_exact"] in (1, None):
        return True
    path = bundled().get(run["scenario"])
    if path is None or not run["scenario_sha"]:
        return False
    settings = RunSettings(trials=run["trials"], seed=run["seed"], propagation=run["propagation"])
    try:
        return sha(configure(load_ref(str(path)), [], settings)) == run["scenario_sha"]
    except (UsageError, ScenarioError):
        return False


def unfinished(db: str, run_ids: Iterable[str] = (), group_id: str | None = None) -> list[str]:
    """The runs among `run_ids` and the runs of `group_id` that did not finish (this
    command's runs: once it exits, one still `running` is interrupted)."""
    path = Path(db)
    if not path.exists():
        return []
    try:
        runs = [r for r in (get_run(path, rid) for rid in run_ids) if r is not None]
        if group_id:
            runs += group_runs(path, group_id)
    except sqlite3.Error:  # not a store any more (replaced while a run wrote it): no hint
        return []
    return [r["run_id"] for r in runs if r["status"] != "finished"]


def resume_hint(
    db: str,
    run_ids: Iterable[str] = (),
    group_id: str | None = None,
    source: Source | None = None,
) -> str:
    """`; resume with: errorflow run [SCENARIO] --resume ID [--db PATH]`, for each
    unfinished run (`source`: this command's scenario, for a run that needs it)."""
    ids = unfinished(db, run_ids, group_id)
    commands = [resume_command(rid, db, source) for rid in ids]
    return f"; resume with: {' ; '.join(commands)}" if commands else ""


def resumable(args: argparse.Namespace) -> Scenario:
    """The scenario of the interrupted run `--resume` names (seed, trials, propagation
    from the store); `args.resume` becomes its whole id."""
    run = _interrupted_run(args)
    args.resume = run["run_id"]
    no_faults = getattr(args, "no_faults", False)
    if run["scenario_exact"] in (1, None) and not args.scenario:
        if args.set or no_faults:  # the stored scenario is the run's, as it was
            option = "--no-faults" if no_faults else f"--set {args.set[0]}"
            raise UsageError(
                f"{option}: a resumed run keeps the scenario it stored (changing it would "
                "mix two experiments); expected only --resume RUN_ID",
                where=f"--resume {run['run_id']}",
            )
        return load_json(run["scenario_json"], f"--resume {run['run_id']}")
    # Redaction changed the stored scenario (it held a secret): run it from the file.
    ref = args.scenario or (run["scenario"] if run["scenario"] in bundled() else None)
    if ref is None:
        raise UsageError(
            "the run's scenario had secrets in it (stored redacted); expected the same "
            f"scenario file (and --set options): errorflow run SCENARIO --resume {run['run_id']}",
            where=f"--resume {run['run_id']}",
        )
    settings = RunSettings(trials=run["trials"], seed=run["seed"], propagation=run["propagation"])
    scenario = configure(load_ref(ref), parse_sets(args.set), settings, folder_of(ref))
    if no_faults:  # as the run that stored it was made (its sha says whether it was)
        scenario = without_faults(scenario)
    if run["scenario_sha"] and sha(scenario) != run["scenario_sha"]:
        given = "the bundled scenario " if not args.scenario else ""
        raise UsageError(
            f"{given}{ref} (with these --set options) is not the scenario the run used; "
            "resuming would mix two experiments: expected its file and --set options",
            where=f"--resume {run['run_id']}",
        )
    return scenario


def _interrupted_run(args: argparse.Namespace) -> StoredRun:
    """The stored run `--resume` names, if it can be resumed."""
    given = [
        option
        for option, on in (
            ("--trials", args.trials),
            ("--seed", args.seed is not None),
            ("--propagation", args.propagation),
            ("--baseline", args.baseline),
        )
        if on
    ]
    if given:
        raise UsageError(
            f"{given[0]}: a resumed run keeps its trials, seed, propagation and arms as "
            "stored; expected only --resume RUN_ID (and the scenario file when asked)",
            where="--resume",
        )
    try:
        found = resolve_id(Path(args.db), args.resume, groups=False)
    except IdLookupError as exc:
        raise id_problem(exc, args.db, "run", "--resume") from None
    run = get_run(Path(args.db), found.id)
    assert run is not None  # resolved just now
    where = f"--resume {run['run_id']}"
    if run["status"] == "finished":
        raise UsageError("the run is finished; nothing to resume", where=where)
    if run["status"] == "running":
        raise UsageError(f"the run is still running (process {run['pid']})", where=where)
    return run
