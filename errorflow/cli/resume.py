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

from errorflow.cli.console import say
from errorflow.cli.errors import UsageError, db_option, id_problem
from errorflow.cli.scenario_input import configure, folder_of, load_ref, parse_sets
from errorflow.core.redact import redact
from errorflow.runtime.runner import EXTERNAL_AGENTS
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
    no_faults: bool = False

    @classmethod
    def of(cls, args: argparse.Namespace) -> Source:
        sets = tuple(getattr(args, "set", None) or ())
        return cls(getattr(args, "scenario", None), sets, getattr(args, "no_faults", False))


def resume_command(
    run_id: str, db: str, source: Source | None = None, options: str = "", named: str = ""
) -> str:
    """The command that resumes `run_id`, exactly: `--resume ID` alone when the store
    can give back the scenario (held exactly, or the bundled scenario of its name is the
    one); otherwise with the scenario the run came from (`source`'s, or SCENARIO when
    this command does not know it) and its `--set` options, as given (a `--set` holding
    a secret is shown redacted, as everything this process prints). `named`: the id
    the command names instead (a group, whose run `run_id` is), `options` after it."""
    tail = f"--resume {shlex.quote(named or run_id)}{options}{db_option(db)}"
    run = get_run(Path(db), run_id) if Path(db).exists() else None
    if run is None or _store_suffices(run):
        return f"errorflow run {tail}"
    if source is None or source.scenario is None:
        return f"errorflow run SCENARIO {tail} (SCENARIO: the file the run came from)"
    sets = [_shown_set(spec) for spec in source.sets]
    words = [shlex.quote(source.scenario), *(f"--set {shlex.quote(spec)}" for spec in sets)]
    words += ["--no-faults"] if source.no_faults else []
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


def _group_runs(db: str, group_id: str) -> list[StoredRun]:
    try:
        return group_runs(Path(db), group_id) if Path(db).exists() else []
    except sqlite3.Error:  # not a store any more: no hint
        return []


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
    group_options: str | None = None,
) -> str:
    """`; resume with: errorflow run [SCENARIO] --resume ID [--db PATH]`, for each
    unfinished run (`source`: this command's scenario, for a run that needs it); for a
    command that makes a group of runs (`group_options`: its ` --propagation both`,
    ` --baseline`), the one command that finishes the group, its arms not begun too."""
    if group_id is not None and group_options is not None:
        runs = _group_runs(db, group_id)
        if not runs:
            return ""  # nothing stored: the command runs again from the start
        command = resume_command(runs[0]["run_id"], db, source, group_options, named=group_id)
        return f"; resume with: {command}"
    ids = unfinished(db, run_ids, group_id)
    commands = [resume_command(rid, db, source) for rid in ids]
    return f"; resume with: {' ; '.join(commands)}" if commands else ""


def resumable(args: argparse.Namespace) -> Scenario:
    """The scenario of the interrupted run `--resume` names (seed, trials, propagation
    from the store); `args.resume` becomes its whole id."""
    run = _interrupted_run(args)
    args.resume = run["run_id"]
    if (run["broker"] or "").endswith(EXTERNAL_AGENTS):
        say(
            f"run {run['run_id']}: its agents were processes of their own "
            "(--external-agents); the trials it left run here, its scenario's agents in "
            "this process (the same for simulated agents; for your own code or servers "
            "reached from their hosts, start a new run with --external-agents instead)"
        )
    return _scenario_of(args, run)


#: The labels of the runs `run --propagation both` makes (with `:baseline` for theirs).
ARMS = ("explicit", "implicit")


def resumable_group(args: argparse.Namespace) -> tuple[Scenario, str] | None:
    """With `--resume GROUP`: the scenario of the group's arms and the group's id, for
    the command that made the group (`--propagation both`, `--baseline`, as its hint
    says) to run what it did not finish; None when `--resume` names a run."""
    try:
        found = resolve_id(Path(args.db), args.resume, groups=True)
    except IdLookupError as exc:
        raise id_problem(exc, args.db, "run or group", "--resume") from None
    if found.kind != "group" or not (args.propagation == "both" or args.baseline):
        return None  # a run (a group of one run, a sweep's cell, resumes as a run)
    where = f"--resume {found.id}"
    if args.trials or args.seed is not None or args.propagation not in (None, "both"):
        raise UsageError(
            "a resumed group keeps its trials, seed and arms as stored; expected only "
            "the options that made it (--propagation both, --baseline)",
            where=where,
        )
    runs = group_runs(Path(args.db), found.id)
    arms = [r for r in runs if r["label"] in ARMS]
    labels = {r["label"] for r in runs}
    made = set(ARMS) if args.propagation == "both" else {arms[0]["label"]} if arms else set()
    expected = made | ({f"{a}:baseline" for a in made} if args.baseline else set())
    if not arms or not labels <= expected:
        said = ", ".join(sorted(str(label) for label in labels))
        raise UsageError(
            f"its runs are {said}: expected the options the command that made it had "
            "(--propagation both, --baseline), or a run id to resume one run",
            where=where,
        )
    if len(runs) == len(expected) and all(r["status"] == "finished" for r in runs):
        raise UsageError("the group is finished; nothing to resume", where=where)
    running = [r for r in runs if r["status"] == "running"]
    if running:
        raise UsageError(
            f"its run {running[0]['run_id']} is still running (process {running[0]['pid']})",
            where=where,
        )
    return _scenario_of(args, arms[0]), found.id


def _scenario_of(args: argparse.Namespace, run: StoredRun) -> Scenario:
    """The scenario `run` ran: its stored copy, or the file (and `--set` options) given
    again when the stored one was redacted, checked against the stored run."""
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
            f"{given}{ref} (with these --set and --no-faults options) is not the scenario the "
            "run used; resuming would mix two experiments: expected its file and the --set "
            "and --no-faults options it ran with",
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
