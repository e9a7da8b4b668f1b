"""`run --resume` and the command that resumes a run: exact, so that running the printed
command resumes it, also when the stored scenario was redacted (it held a secret) and
the scenario file and its `--set` options must be given again."""

from __future__ import annotations

import json
import re
import resource
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from errorflow.cli.main import main
from errorflow.cli.resume import Source, resume_command, resume_hint
from errorflow.runtime.runner import EXTERNAL_AGENTS
from errorflow.scenario.bundled import bundled
from errorflow.store.readers import get_run, group_runs, trial_rows

SECRET = "EnvSecret321"


def secret_scenario(tmp: Path, name: str = "contamination") -> Path:
    """The bundled contamination scenario under its own name, its fault's text holding an
    environment-style secret: the store keeps it redacted, so not exactly."""
    text = bundled()["contamination"].read_text()
    text = text.replace("name: contamination", f"name: {name}")
    line = next(ln for ln in text.splitlines() if "error_text:" in ln)
    text = text.replace(line, f'        error_text: "HTTP 401 Unauthorized: SECRET_KEY={SECRET}"')
    path = tmp / "own.yaml"
    path.write_text(text)
    return path


def interrupt(db: Path, run_id: str, keep: int = 1) -> None:
    """As a run killed after its first trials leaves the store."""
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE runs SET status = 'interrupted', summary_json = NULL")
        conn.execute("DELETE FROM trials WHERE run_id = ? AND trial >= ?", (run_id, keep))
    conn.close()


def run_printed(command: str) -> subprocess.CompletedProcess[str]:
    words = shlex.split(command)
    assert words[0] == "errorflow"
    return subprocess.run([sys.executable, "-m", "errorflow", *words[1:]],
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_a_run_stored_exactly_resumes_by_its_id(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    assert main(["run", "partial-success", "--trials", "2", "-q", "--run-id", "ex-1",
                 "--db", str(db)]) == 0  # fmt: skip
    interrupt(db, "ex-1")
    source = Source("partial-success", ("trials=7",))
    assert resume_command("ex-1", str(db), source) == f"errorflow run --resume ex-1 --db {db}"


def test_a_bundled_scenario_with_secrets_resumes_by_its_id(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    assert main(["run", "contamination", "--trials", "2", "-q", "--run-id", "bu-1",
                 "--db", str(db)]) == 0  # fmt: skip
    interrupt(db, "bu-1")
    run = get_run(db, "bu-1")
    assert run is not None and run["scenario_exact"] == 0
    assert resume_command("bu-1", str(db)) == f"errorflow run --resume bu-1 --db {db}"


def test_an_own_file_with_secrets_is_named_in_the_command_and_it_resumes(
    tmp_path: Path,
) -> None:
    """The scenario's name is a bundled one, but its file is not: `--resume ID` alone
    would take the bundled scenario and be refused."""
    own, db = secret_scenario(tmp_path), tmp_path / "o.db"
    sets = ["agents.writer.model.params={p_heed_upstream: 0.5}"]
    argv = ["run", str(own), "--set", sets[0], "--trials", "3", "-q", "--run-id", "own-1"]
    assert main([*argv, "--db", str(db)]) == 0
    interrupt(db, "own-1")
    assert resume_command("own-1", str(db)) == (
        f"errorflow run SCENARIO --resume own-1 --db {db} (SCENARIO: the file the run came from)"
    )
    command = resume_command("own-1", str(db), Source(str(own), tuple(sets)))
    assert command == (f"errorflow run {own} --set '{sets[0]}' --resume own-1 --db {db}")
    done = run_printed(command)
    assert done.returncode == 0, done.stderr
    run = get_run(db, "own-1")
    assert run is not None and run["status"] == "finished" and len(trial_rows(db, "own-1")) == 3


def test_both_arms_of_an_own_file_resume_from_the_printed_commands(tmp_path: Path) -> None:
    own, db = secret_scenario(tmp_path), tmp_path / "a.db"
    assert main(["run", str(own), "--propagation", "both", "--baseline", "--trials", "2",
                 "-q", "--db", str(db)]) == 0  # fmt: skip
    (group,) = {r["group_id"] for r in group_runs_any(db)}
    for run in group_runs(db, group):
        interrupt(db, run["run_id"])
    hint = resume_hint(str(db), group_id=group, source=Source(str(own)))
    commands = hint.removeprefix("; resume with: ").split(" ; ")
    assert len(commands) == 4  # two arms and their fault-free baselines
    assert sum(str(own) in c for c in commands) == 2  # the baselines have no secret left
    for command in commands:
        done = run_printed(command)
        assert done.returncode == 0, (command, done.stderr)
    assert all(r["status"] == "finished" for r in group_runs(db, group))


def group_runs_any(db: Path) -> list[sqlite3.Row]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    rows = conn.execute("SELECT group_id FROM runs WHERE group_id IS NOT NULL").fetchall()
    conn.close()
    return rows


def test_a_secret_in_a_set_option_is_not_printed(tmp_path: Path) -> None:
    own, db = secret_scenario(tmp_path), tmp_path / "s.db"
    assert main(["run", str(own), "--trials", "1", "-q", "--run-id", "s-1", "--db", str(db)]) == 0
    interrupt(db, "s-1", keep=0)
    source = Source(str(own), ("tools.search_papers.faults.0.error_text=SECRET_KEY=abc",))
    command = resume_command("s-1", str(db), source)
    assert "abc" not in command and "SECRET_KEY=[REDACTED]" in command
    assert command.endswith("(give the secret --set values again)")


def _has_trials(db: Path, run_id: str) -> bool:
    try:
        return bool(trial_rows(db, run_id))
    except (FileNotFoundError, sqlite3.Error):  # not created yet, or being created
        return False


def test_the_command_printed_on_ctrl_c_resumes_the_run(tmp_path: Path) -> None:
    own, db = secret_scenario(tmp_path), tmp_path / "c.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "errorflow", "run", str(own), "--trials", "300",
         "--run-id", "cut-1", "--db", str(db), "-q"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not _has_trials(db, "cut-1"):  # the run is under way
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the run finished before the interrupt reached it")
    assert proc.returncode == 130, err
    prefix = "error: interrupted; resume with: "
    assert err.startswith(prefix) and SECRET not in err
    command = err.strip().removeprefix(prefix)
    assert command == f"errorflow run {own} --resume cut-1 --db {db}"
    done = run_printed(command)
    assert done.returncode == 0, done.stderr
    run = get_run(db, "cut-1")
    assert run is not None and run["status"] == "finished"
    assert len(trial_rows(db, "cut-1")) == 300


# -- a full disk: one line, the run stopped at once, and `--resume` completes it ----------

#: No file the run writes may grow past this: its store fails a write a few dozen trials
#: in (a real failed write, EFBIG, as on a full disk; no root or mount needed).
FILE_LIMIT = 1_000_000


def _disk_of_limited_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails, not kills
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))


def _outcomes(db: Path, run_id: str) -> list[tuple[object, ...]]:
    rows = trial_rows(db, run_id)
    return [(r["trial"], r["outcome"], r["depth"], r["reason"], r["costs_json"]) for r in rows]


FULL_RUN = ["run", "contamination", "--trials", "200", "-q", "--db"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[object, ...]]:
    """The outcomes of the run, never stopped."""
    clean = tmp_path_factory.mktemp("clean") / "clean.db"
    assert main([*FULL_RUN, str(clean), "--run-id", "clean"]) == 0
    return _outcomes(clean, "clean")


@pytest.mark.parametrize("workers", [1, 2])
def test_a_full_disk_stops_the_run_in_one_line_and_its_resume_completes_it(
    tmp_path: Path, workers: int, uninterrupted: list[tuple[object, ...]]
) -> None:
    """The run (its workers' stores too) hits the limit mid-run: it says so in one line
    naming the store and the error, exits 1 and leaves what it stored intact; with room
    again, the command it printed finishes the run with the outcomes of a run never
    stopped."""
    db = tmp_path / "full.db"
    failed = subprocess.run(
        [sys.executable, "-m", "errorflow", *FULL_RUN, str(db), "--run-id", "full-1",
         "--workers", str(workers)],
        capture_output=True, text=True, timeout=120, preexec_fn=_disk_of_limited_size,
    )  # fmt: skip
    assert failed.returncode == 1, failed.stderr
    assert failed.stderr.count("\n") == 1, failed.stderr
    line = failed.stderr.strip()
    said = re.fullmatch(
        rf"error: store {re.escape(str(db))}: (?:disk I/O error \(SQLITE_IOERR_WRITE\)|"
        r"database or disk is full \(SQLITE_FULL\))(?: \(a worker's store beside it\))?"
        r"; run full-1 stopped with (\d+) of 200 "
        r"trials stored; resume with: (errorflow run .*)",
        line,
    )
    assert said is not None, line
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    stored = _outcomes(db, "full-1")
    assert len(stored) == int(said[1]) < 200
    assert set(stored) <= set(uninterrupted)  # what was stored is as a whole run stores it
    resumed = run_printed(said[2])
    assert resumed.returncode == 0, resumed.stderr
    assert _outcomes(db, "full-1") == uninterrupted


FAULTY = """\
name: faulty
seed: 21
trials: 12
world:
  metrics: {rev.q3: 1000, cost.q3: 600}
tools:
  kpi:
    kind: metric_store
    faults: [{kind: transient, p: 0.3}, {kind: not_found, p: 0.1}]
agents:
  sales: {role: researcher, tools: [kpi], sends_to: [analyst], faults: [{kind: corrupt, p: 0.3}]}
  analyst:
    role: analyst
    behaviour: gather
    sends_to: [writer]
    model: {faults: [{kind: overloaded, p: 0.3}]}
  writer: {role: writer}
task:
  prompt: Q3 revenue and cost.
  needs:
    - {id: revenue, tool: kpi, wording: Q3 revenue, value: rev.q3}
    - {id: cost, tool: kpi, wording: Q3 cost, value: cost.q3}
"""
COUNTED = ("agent_faults", "model_faults", "tool_faults")


def _summary(db: Path, run_id: str) -> dict[str, object]:
    run = get_run(db, run_id)
    assert run is not None and run["status"] == "finished"
    summary = run["summary"]
    assert summary is not None
    return dict(summary)


@pytest.mark.parametrize(("workers", "bus"), [("1", True), ("2", False)])
def test_a_resumed_run_counts_faults_and_policy_over_every_trial(
    tmp_path: Path, workers: str, bus: bool
) -> None:
    """What fired and what the policies did in the trials kept from before the
    interruption is counted again, as in a run never stopped (bus faults too: workers
    do not split a run that has them)."""
    path = tmp_path / "faulty.yaml"
    bus_faults = "bus: {duplicate: {p: 0.3}}\ntask:\n" if bus else "task:\n"
    path.write_text(FAULTY.replace("task:\n", bus_faults))
    dbs = {run_id: tmp_path / f"{run_id}.db" for run_id in ("whole", "cut")}
    for run_id, db in dbs.items():
        assert main(["run", str(path), "-q", "--run-id", run_id, "--db", str(db),
                     "--workers", workers]) == 0  # fmt: skip
    interrupt(dbs["cut"], "cut", keep=7)
    resume = ["run", "--resume", "cut", "--db", str(dbs["cut"]), "--workers", workers, "-q"]
    assert main(resume) == 0
    whole, cut = _summary(dbs["whole"], "whole"), _summary(dbs["cut"], "cut")
    for key in (*COUNTED, *(("bus_faults", "bus_recovery") if bus else ())):
        assert cut[key] == whole[key], key
    for key in ("tool_faults", *(("bus_faults",) if bus else ())):
        fired = whole[key]
        assert isinstance(fired, dict) and any(c["fired"] for c in fired.values()), key
    metrics = (whole["metrics"], cut["metrics"])
    assert isinstance(metrics[0], dict) and isinstance(metrics[1], dict)
    assert metrics[0]["policy"] and metrics[1]["policy"] == metrics[0]["policy"]


def _rows(db: Path) -> tuple[object, ...]:
    with sqlite3.connect(db) as conn:
        return tuple(
            conn.execute(sql).fetchall()
            for sql in (
                "SELECT trial, type, count(*) FROM events WHERE sender != 'runner'"
                " GROUP BY trial, type ORDER BY trial, type",
                "SELECT trial, kind, count(*) FROM messages WHERE kind IN ('task', 'result')"
                " OR topic LIKE '%/ack/%' GROUP BY trial, kind ORDER BY trial, kind",
                "SELECT trial, outcome FROM trials ORDER BY trial",
            )
        )


def test_a_resumed_run_stores_a_rerun_bus_fault_trial_once(tmp_path: Path) -> None:
    """A trial that ended a bus fault runs again on `--resume`: what it stored the first
    time is forgotten, so the store holds what a run never stopped holds."""
    path = tmp_path / "lossy.yaml"
    bus = "bus: {drop: {p: 0.3}, max_resends: 0, ack_timeout_s: 0.05}\ntask:\n"
    path.write_text(FAULTY.replace("task:\n", bus))
    dbs = {run_id: tmp_path / f"{run_id}.db" for run_id in ("whole", "cut")}
    for run_id, db in dbs.items():
        assert main(["run", str(path), "-q", "--run-id", run_id, "--db", str(db)]) == 0
    with sqlite3.connect(dbs["cut"]) as conn:
        stored = dict(conn.execute("SELECT trial, outcome FROM trials").fetchall())
    assert "bus_fault" in list(stored.values())[:7]  # a bus fault among the trials kept
    interrupt(dbs["cut"], "cut", keep=7)
    assert main(["run", "--resume", "cut", "--db", str(dbs["cut"]), "-q"]) == 0
    assert _rows(dbs["cut"]) == _rows(dbs["whole"])


@pytest.mark.parametrize(("workers", "bus"), [("1", True), ("2", False)])
def test_a_resumed_run_counts_what_was_rejected_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], workers: str, bus: bool
) -> None:
    """The messages rejected before the interruption are counted with the rest (a copy
    of a trial run again is rejected again, not twice)."""
    path = tmp_path / "dup.yaml"
    path.write_text(FAULTY.replace("task:\n", "bus: {duplicate: {p: 0.3}}\ntask:\n" if bus
                                   else "task:\n"))  # fmt: skip
    dbs = {run_id: tmp_path / f"{run_id}.db" for run_id in ("whole", "cut")}
    printed = {}
    for run_id, db in dbs.items():
        command = ["run", str(path), "--json", "--run-id", run_id, "--db", str(db)]
        assert main([*command, "--workers", workers]) == 0
        printed[run_id] = json.loads(capsys.readouterr().out)["rejects"]
    assert bool(printed["whole"].get("duplicate")) is bus
    interrupt(dbs["cut"], "cut", keep=7)
    unscored = json.dumps({"run_id": "cut", "trial": 9, "kind": "result"}).encode()
    with sqlite3.connect(dbs["cut"]) as conn:  # what is not a duplicate stays, as it was seen
        conn.execute("INSERT INTO rejects VALUES ('cut', 't', 'bad_json', '', x'00', 0)")
        conn.execute("INSERT INTO rejects VALUES ('cut', 't', 'bad_signature', '', ?, 0)",
                     (unscored,))  # fmt: skip
    resume = ["run", "--resume", "cut", "--db", str(dbs["cut"]), "--json", "--workers", workers]
    assert main(resume) == 0
    resumed = json.loads(capsys.readouterr().out)["rejects"]
    assert resumed == {**printed["whole"], "bad_json": 1, "bad_signature": 1}
    with sqlite3.connect(dbs["cut"]) as conn:
        stored = dict(conn.execute("SELECT reason, count(*) FROM rejects GROUP BY reason"))
    assert stored == resumed


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--no-faults"], "--no-faults: a resumed run keeps the scenario it stored"),
        (["--set", "trials=3"], "--set trials=3: a resumed run keeps the scenario it stored"),
        (["--baseline"], "--baseline: a resumed run keeps its trials, seed, propagation and arms"),
    ],
)
def test_resume_refuses_what_would_change_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], said: str
) -> None:
    db = tmp_path / "e.db"
    assert main(["run", "partial-success", "--trials", "2", "-q", "--run-id", "ex-1",
                 "--db", str(db)]) == 0  # fmt: skip
    interrupt(db, "ex-1")
    capsys.readouterr()
    assert main(["run", "--resume", "ex-1", "--db", str(db), *extra]) == 2
    assert said in " ".join(capsys.readouterr().err.split())


def _forget_run(db: Path, run_id: str) -> None:
    """As a command stopped before it began this run leaves the store."""
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type='table'")]
        for table in tables:
            columns = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
            if "run_id" in columns:
                conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))


def _paired_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main([*argv, "--json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert isinstance(doc, dict)
    return doc


@pytest.mark.parametrize(
    ("options", "stopped", "begun"),
    [
        (["--propagation", "both"], "explicit", []),  # stopped in the first arm
        (["--propagation", "both"], "implicit", ["explicit"]),  # in the second
        (["--baseline"], "explicit", []),  # before its baseline began
    ],
)
def test_a_group_resumes_whole_from_the_printed_command(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    options: list[str],
    stopped: str,
    begun: list[str],
) -> None:
    """A command that makes several runs, stopped in one of them, is finished by the
    command its hint prints: the runs it finished are read back, the one it stopped
    in resumed, those it never began run, and it prints what the whole command would."""
    base = ["run", "partial-success", "--trials", "6", *options]
    whole = _paired_json(capsys, [*base, "--db", str(tmp_path / "whole.db")])
    db = tmp_path / "cut.db"
    cut = _paired_json(capsys, [*base, "--db", str(db)])
    group = cut.get("group_id") or get_run(db, cut["run_id"])["group_id"]  # type: ignore[index]
    runs = {r["label"]: r["run_id"] for r in group_runs(db, group)}
    for label, run_id in runs.items():
        if label == stopped:
            with sqlite3.connect(db) as conn:
                conn.execute("UPDATE runs SET status = 'interrupted', summary_json = NULL"
                             " WHERE run_id = ?", (run_id,))  # fmt: skip
                conn.execute("DELETE FROM trials WHERE run_id = ? AND trial >= 2", (run_id,))
        elif label not in begun:
            _forget_run(db, run_id)
    hint = resume_hint(str(db), [], group, None, " " + " ".join(options))
    command = hint.removeprefix("; resume with: ")
    assert command == f"errorflow run --resume {group} {' '.join(options)} --db {db}"
    resumed = _paired_json(capsys, shlex.split(command)[1:])
    for doc in (whole, resumed):
        for volatile in ("group_id", "run_id", "wall_seconds"):
            doc.pop(volatile, None)
        for arm in doc.get("arms", {}).values():
            arm.pop("run_id")
            arm.pop("rejects")
    assert resumed == whole


def test_a_sweeps_cell_resumes_as_a_run_not_as_an_arm(tmp_path: Path) -> None:
    """`--resume GROUP` without the options of a paired command is a run's resume: a
    sweep's one interrupted cell is finished, and nothing else joins its group."""
    db = tmp_path / "s.db"
    vary = "agents.researcher.policy.strategy=resilient,blind-retry"
    assert main(["sweep", "contamination", "--vary", vary, "--trials", "4", "--no-baseline",
                 "-q", "--db", str(db)]) == 0  # fmt: skip
    [group] = {r["group_id"] for r in group_runs_any(db)}
    runs = {r["label"]: r["run_id"] for r in group_runs(db, group)}
    _forget_run(db, runs["blind-retry"])
    interrupt(db, runs["resilient"], keep=2)
    assert main(["run", "--resume", group, "--db", str(db), "-q"]) == 0
    after = group_runs(db, group)
    assert [(r["label"], r["status"]) for r in after] == [("resilient", "finished")]


def test_the_printed_command_resumes_a_fault_free_run_of_a_file_with_secrets(
    tmp_path: Path,
) -> None:
    path = secret_scenario(tmp_path)  # its secret out of the faults too: kept redacted
    prompt = "prompt: Write a short literature report on transformer attention."
    path.write_text(path.read_text().replace(prompt, f'prompt: "SECRET_KEY={SECRET}"'))
    db = tmp_path / "n.db"
    assert main(["run", str(path), "--no-faults", "--trials", "3", "-q", "--run-id", "nf-1",
                 "--db", str(db)]) == 0  # fmt: skip
    interrupt(db, "nf-1")
    command = resume_command("nf-1", str(db), Source(str(path), (), no_faults=True))
    assert command == f"errorflow run {path} --no-faults --resume nf-1 --db {db}"
    done = run_printed(command)
    assert done.returncode == 0, done.stderr


def test_a_run_of_external_agents_resumed_here_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its trials left run with the scenario's agents in this process: said, not hidden."""
    db = tmp_path / "x.db"
    assert main(["run", "contamination", "--trials", "3", "-q", "--run-id", "ext-1",
                 "--db", str(db)]) == 0  # fmt: skip
    interrupt(db, "ext-1")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET broker = broker || ?", (EXTERNAL_AGENTS,))
    capsys.readouterr()
    assert main(["run", "--resume", "ext-1", "--db", str(db), "-q"]) == 0
    assert "processes of their own (--external-agents)" in capsys.readouterr().err
