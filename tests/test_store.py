"""The SQLite store: run rows through their life, every table's rows round trip, the
readers, and databases written by an earlier version."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from errorflow.core.costs import Costs
from errorflow.protocol.envelope import Envelope, Kind, Status
from errorflow.scoring.score import (
    Label,
    MessageLabel,
    Outcome,
    TrialScore,
)
from errorflow.scoring.summary import summarize
from errorflow.store import failures, opening
from errorflow.store.batch_insert import insert_rows
from errorflow.store.opening import (
    UnusableStore,
    UnwritableStore,
    check_writable,
    connect_ro,
    open_db,
)
from errorflow.store.readers import (
    effective_status,
    get_run,
    group_runs,
    list_runs,
    load_scores,
    trial_rows,
)
from errorflow.store.rows import (
    EventRow,
    LabelRow,
    MessageRow,
    RejectRow,
    TrialRow,
)
from errorflow.store.runs import create_run, finish_run, resume_run


def envelope(kind: Kind = Kind.RESULT, **update: object) -> Envelope:
    fields: dict[str, object] = {
        "run_id": "run-1",
        "trial": 3,
        "seq": 7,
        "sender": "writer",
        "recipient": "runner",
        "kind": kind,
        "trace_id": "run-1-t3",
        "status": Status.PARTIAL_FAILURE,
        "confidence": 0.4,
        "payload": {"type": "model_call"} if kind is Kind.EVENT else {"report": "x"},
    }
    return Envelope.model_validate({**fields, **update})


async def new_run(
    db_path: Path,
    run_id: str = "run-1",
    *,
    group_id: str | None = None,
    label: str | None = None,
    scenario_sha: str | None = None,
) -> None:
    db = await open_db(db_path)
    try:
        await create_run(
            db,
            run_id=run_id,
            scenario="contamination",
            scenario_json='{"name": "contamination"}',
            seed=42,
            trials=4,
            propagation="explicit",
            broker="embedded",
            group_id=group_id,
            label=label,
            scenario_sha=scenario_sha,
        )
    finally:
        await db.close()


SCORES = [
    TrialScore(0, Outcome.SUCCESS, 0, costs=Costs(backend_calls=2, model_calls=3)),
    TrialScore(1, Outcome.CONTAMINATED, 2, reason="fabricated", costs=Costs(retries=1.5)),
    TrialScore(2, Outcome.BUS_FAULT, 0, reason="no final result within 1s"),
]


async def test_a_run_is_created_finished_and_resumed(tmp_path: Path) -> None:
    db_path = tmp_path / "s.db"
    await new_run(db_path, group_id="g1", label="explicit", scenario_sha="abc")
    run = get_run(db_path, "run-1")
    assert run is not None
    assert run["status"] == "running" and run["summary"] is None
    assert (run["group_id"], run["label"], run["scenario_sha"]) == ("g1", "explicit", "abc")
    assert (run["pid"], run["host"]) == (os.getpid(), socket.gethostname())
    summary = summarize(SCORES)
    db = await open_db(db_path)
    try:
        await finish_run(db, "run-1", "interrupted", summary)
        assert get_run(db_path, "run-1")["status"] == "interrupted"  # type: ignore[index]
        await resume_run(db, "run-1")
        resumed = get_run(db_path, "run-1")
        assert resumed is not None and resumed["status"] == "running"
        assert resumed["finished"] is None
        await finish_run(db, "run-1", "finished", summary)
    finally:
        await db.close()
    done = get_run(db_path, "run-")  # a unique prefix finds it
    assert done is not None and done["status"] == "finished"
    assert done["summary"] == json.loads(json.dumps(summary))
    assert done["finished"] >= done["started"]


async def test_trial_and_label_rows_round_trip_into_scores(tmp_path: Path) -> None:
    db_path = tmp_path / "s.db"
    await new_run(db_path)
    label = MessageLabel("m1", "writer", Label.CONTAMINATED, "false claim", touched=True)
    db = await open_db(db_path)
    try:
        await insert_rows(
            db,
            [],
            [],
            [],
            [TrialRow.from_score("run-1", s) for s in SCORES],
            [LabelRow.from_label("run-1", 1, label)],
        )
        # a trial scored again (a resumed run) replaces its row
        again = TrialScore(1, Outcome.CONTAINED, 0, reason="flagged", costs=Costs(retries=2))
        await insert_rows(db, [], [], [], [TrialRow.from_score("run-1", again)], [])
    finally:
        await db.close()
    rows = trial_rows(db_path, "run-1")
    assert [(r["trial"], r["outcome"], r["depth"]) for r in rows] == [
        (0, "success", 0),
        (1, "contained", 0),
        (2, "bus_fault", 0),
    ]
    assert rows[0]["costs"] == Costs(backend_calls=2, model_calls=3).to_wire()
    scores = load_scores(db_path, "run-1")
    assert sorted(scores) == [0, 1]  # bus faults are rerun by --resume
    assert scores[0].costs == Costs(backend_calls=2, model_calls=3)
    assert (scores[1].outcome, scores[1].reason, scores[1].costs) == (
        Outcome.CONTAINED,
        "flagged",
        Costs(retries=2),
    )
    everything = load_scores(db_path, "run-1", include_bus_faults=True)
    assert everything[2].outcome is Outcome.BUS_FAULT
    assert everything[2].reason == "no final result within 1s"
    with connect_ro(db_path) as conn:
        stored = conn.execute("SELECT * FROM labels").fetchall()
    assert [tuple(r) for r in stored] == [
        ("run-1", 1, "m1", "writer", "contaminated", "false claim")
    ]


async def test_message_event_and_reject_rows_round_trip(tmp_path: Path) -> None:
    db_path = tmp_path / "s.db"
    await new_run(db_path)
    result, event = envelope(), envelope(Kind.EVENT, id="e1", recipient="observers")
    wire = result.encode().decode()
    row = MessageRow.from_envelope(result, "errorflow/run-1/inbox/runner", 12.5, wire)
    assert row == MessageRow.from_envelope(result, "errorflow/run-1/inbox/runner", 12.5)
    reject = RejectRow("run-1", "errorflow/run-1/inbox/x", "bad_json", "line 1", b"{\xff", 13.0)
    db = await open_db(db_path)
    try:
        await insert_rows(db, [row], [EventRow.from_envelope(event, 12.75)], [reject], [], [])
        # the runner's backfill repeats a message the recorder stored: kept once
        later = MessageRow.from_envelope(result, "errorflow/run-1/inbox/runner", 99.0)
        await insert_rows(db, [later], [], [], [], [])
    finally:
        await db.close()
    with connect_ro(db_path) as conn:
        messages = [tuple(r) for r in conn.execute("SELECT * FROM messages")]
        events = [tuple(r) for r in conn.execute("SELECT * FROM events")]
        rejects = [tuple(r) for r in conn.execute("SELECT * FROM rejects")]
    assert messages == [tuple(row)]
    assert messages[0][6:9] == ("result", "partial_failure", 0.4)
    assert Envelope.model_validate_json(messages[0][10]) == result
    assert events == [("run-1", "e1", 3, 7, "writer", "model_call", event.encode().decode(), 12.75)]
    assert rejects == [tuple(reject)]
    counts = get_run(db_path, "run-1")
    assert counts is not None
    assert counts["counts"] == {"messages": 1, "events": 1, "rejects": 1, "trials": 0}
    assert counts["rejects_by_reason"] == {"bad_json": 1}


def test_rows_are_redacted_as_they_are_built_whoever_sent_them() -> None:
    """The store's own net: a message that reached the recorder with a secret in it (a
    sender that let one through) is stored redacted, as data, like a trial's reason."""
    secret = {"prompt": "use postgres://admin:pw@db/x", "args": {"api_key": "k1"}}
    result = envelope(payload=secret)
    for row in (
        MessageRow.from_envelope(result, "t", 1.0, result.encode().decode()),
        MessageRow.from_envelope(result, "t", 1.0),
        EventRow.from_envelope(envelope(Kind.EVENT, payload={"type": "x", **secret}), 1.0),
    ):
        stored = json.loads(row.envelope)
        assert stored["payload"]["prompt"] == "use [REDACTED_URL]"
        assert stored["payload"]["args"] == {"api_key": "[REDACTED]"}
        assert "admin:pw" not in row.envelope and "k1" not in row.envelope
    clean = envelope()
    assert MessageRow.from_envelope(clean, "t", 1.0).envelope == clean.encode().decode()
    score = TrialScore(0, Outcome.CONTAINED, 0, reason="crashed: token=abc123")
    label = MessageLabel("m1", "w", Label.CONTAINED, "SECRET_KEY=abc123", touched=True)
    assert "abc123" not in str(TrialRow.from_score("run-1", score))
    assert "abc123" not in str(LabelRow.from_label("run-1", 0, label))


def test_an_event_of_an_unknown_kind_keeps_its_type_string() -> None:
    env = envelope(Kind.EVENT, payload={"type": "from_the_future", "x": 1})
    assert EventRow.from_envelope(env, 1.0).type == "from_the_future"
    assert EventRow.from_envelope(envelope(Kind.EVENT, payload={}), 1.0).type == ""


async def test_list_and_group_runs(tmp_path: Path) -> None:
    db_path = tmp_path / "s.db"
    await new_run(db_path, "a-1", group_id="g", label="explicit")
    await new_run(db_path, "b-1", group_id="g", label="implicit")
    await new_run(db_path, "c-1")
    listed = list_runs(db_path)
    assert [r["run_id"] for r in listed] == ["c-1", "b-1", "a-1"]  # newest first
    assert set(listed[0]) == {
        "run_id",
        "scenario",
        "seed",
        "trials",
        "propagation",
        "status",
        "started",
        "finished",
        "group_id",
        "label",
    }
    assert listed[1]["label"] == "implicit" and listed[0]["status"] == "running"
    assert [r["run_id"] for r in group_runs(db_path, "g")] == ["a-1", "b-1"]
    assert get_run(db_path, "nope") is None
    assert get_run(db_path, "") is None  # a prefix that matches several runs


def test_effective_status_of_a_running_run_whose_process_is_gone() -> None:
    here = socket.gethostname()
    assert effective_status("finished", None, None) == "finished"
    assert effective_status("running", os.getpid(), here) == "running"
    assert effective_status("running", None, here) == "running"
    assert effective_status("running", 12345, "another-host") == "running"
    dead = 2**22 + 12345  # above any pid_max: no such process
    assert effective_status("running", dead, here) == "interrupted"


async def test_a_database_of_an_earlier_version_gets_the_new_columns(tmp_path: Path) -> None:
    db_path = tmp_path / "old.db"
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            "CREATE TABLE runs (run_id TEXT PRIMARY KEY, scenario TEXT NOT NULL,"
            " scenario_json TEXT NOT NULL, seed INTEGER NOT NULL, trials INTEGER NOT NULL,"
            " propagation TEXT NOT NULL, broker TEXT, status TEXT NOT NULL,"
            " started REAL NOT NULL, finished REAL, summary_json TEXT)"
        )
        conn.execute(
            "INSERT INTO runs VALUES ('old-1', 's', '{}', 1, 2, 'explicit', NULL,"
            " 'finished', 1.0, 2.0, NULL)"
        )
        conn.execute(
            "CREATE TABLE trials (run_id TEXT NOT NULL, trial INTEGER NOT NULL, outcome TEXT"
            " NOT NULL, depth INTEGER NOT NULL, reason TEXT NOT NULL, costs_json TEXT NOT NULL,"
            " PRIMARY KEY (run_id, trial))"
        )
        conn.execute("INSERT INTO trials VALUES ('old-1', 0, 'success', 0, '', '{}')")
    conn.close()
    db = await open_db(db_path)
    await db.close()
    with connect_ro(db_path) as ro:
        columns = {r[1] for r in ro.execute("PRAGMA table_info(runs)")}
        trial_columns = {r[1] for r in ro.execute("PRAGMA table_info(trials)")}
    ro.close()
    new = {"group_id", "label", "pid", "host", "scenario_sha", "scenario_exact"}
    assert new <= columns and "credit_json" in trial_columns
    # a trial stored before partial credit was comes back without it
    old_trial = load_scores(db_path, "old-1")[0]
    assert (old_trial.credit, old_trial.struck) == ({}, False)
    old = get_run(db_path, "old-1")
    assert old is not None and old["status"] == "finished" and old["group_id"] is None
    await new_run(db_path, "new-1")  # and the old database takes new runs
    assert [r["run_id"] for r in list_runs(db_path)] == ["new-1", "old-1"]


def test_readers_refuse_a_missing_database(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no database"):
        list_runs(tmp_path / "absent.db")


# -- opening: a path that cannot hold the store says so, at once, and leaves nothing open --


@contextlib.contextmanager
def held_lock(db: Path) -> Iterator[None]:
    """Another process holding `BEGIN EXCLUSIVE` on `db` until the block ends."""
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(db)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield
    finally:
        holder.stdin.close()  # the holder exits when its stdin does
        holder.wait(timeout=30)


LOCK_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
"""


def bad_store(tmp: Path, kind: str) -> Path:
    """A path that cannot hold a store, of each kind (`locked` ones are locked by the caller)."""
    path = tmp / f"{kind.replace(' ', '-')}.db"
    if kind == "directory":
        path.mkdir()
    elif kind == "text file":
        path.write_text("hello, this is not a database\n")
    elif kind == "short file":
        path.write_bytes(b"x")  # SQLite alone takes it for an empty database
    elif kind == "damaged":
        path.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 16)
    elif kind == "fifo":
        os.mkfifo(path)
    return path


BAD_KINDS = ["directory", "text file", "short file", "damaged", "fifo"]


def _threads() -> set[threading.Thread]:
    """aiosqlite's connection threads (not daemons: a live one keeps the process alive)."""
    return {t for t in threading.enumerate() if "_connection_worker_thread" in t.name}


@pytest.mark.parametrize("kind", BAD_KINDS)
async def test_a_path_that_is_no_store_is_refused_and_left_as_it_was(
    tmp_path: Path, kind: str
) -> None:
    path = bad_store(tmp_path, kind)
    before = path.read_bytes() if path.is_file() else None
    threads = _threads()
    with pytest.raises(UnwritableStore) as caught:
        await open_db(path)
    with pytest.raises(UnwritableStore):
        check_writable(path)
    with pytest.raises(UnusableStore) as read:
        connect_ro(path)
    assert caught.value.path == path and read.value.reason == caught.value.reason
    assert _threads() <= threads  # no aiosqlite thread left to hold the process
    if before is not None:
        assert path.read_bytes() == before  # not written over


async def test_another_programs_database_is_not_written_into(tmp_path: Path) -> None:
    path = tmp_path / "shop.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE customers (id, name)")
    before = path.read_bytes()
    with pytest.raises(UnwritableStore, match=r"not an errorflow store .*tables are customers"):
        await open_db(path)
    with pytest.raises(UnwritableStore):
        check_writable(path)
    assert path.read_bytes() == before


async def test_a_failure_after_connecting_closes_the_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = bad_store(tmp_path, "text file")
    monkeypatch.setattr(opening, "_ready_to_write", lambda path: None)  # as if it changed since
    threads = _threads()
    with pytest.raises(UnwritableStore, match="not a database"):
        await open_db(path)
    await asyncio.sleep(0)
    for thread in _threads() - threads:
        thread.join(timeout=10)  # the worker stops once asked; a leaked one never does
        assert not thread.is_alive()


def test_a_process_whose_open_failed_exits(tmp_path: Path) -> None:
    """The aiosqlite thread of a failed open kept the process alive after its traceback."""
    path = bad_store(tmp_path, "text file")
    script = (
        "import asyncio, sys; from pathlib import Path;"
        "from errorflow.store import opening;"
        "opening._ready_to_write = lambda path: None;"
        "asyncio.run(opening.open_db(Path(sys.argv[1])))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1 and "UnwritableStore" in proc.stderr


async def test_a_store_locked_by_another_process_is_refused(tmp_path: Path) -> None:
    wal, journal = tmp_path / "wal.db", tmp_path / "journal.db"
    await new_run(wal)
    await new_run(journal)
    conn = sqlite3.connect(journal, isolation_level=None)
    assert conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"  # readers wait
    conn.close()
    with held_lock(wal):
        with pytest.raises(UnwritableStore, match="locked by another process") as caught:
            check_writable(wal)
        assert "wait for that process" in caught.value.expected
        with pytest.raises(UnwritableStore, match="locked"):
            await open_db(wal)
        assert [r["run_id"] for r in list_runs(wal)] == ["run-1"]  # WAL: readers go on
    with held_lock(journal), pytest.raises(UnusableStore, match="locked"):
        list_runs(journal)
    assert [r["run_id"] for r in list_runs(journal)] == ["run-1"]  # and once it is free


def test_a_read_only_store_is_read_but_not_written(shared_dir: Path) -> None:
    """Run as a user without write access (root ignores permissions: as nobody)."""
    store_dir = shared_dir / "ro"
    store_dir.mkdir()
    asyncio.run(new_run(store_dir / "s.db"))  # WAL, closed: no -wal or -shm file left
    (store_dir / "s.db").chmod(0o444)
    store_dir.chmod(0o555)
    script = (
        "import asyncio, sys; from pathlib import Path\n"
        "from errorflow.store import opening, readers\n"
        "p = Path(sys.argv[1])\n"
        "print([r['run_id'] for r in readers.list_runs(p / 's.db')])\n"
        "for path in (p / 's.db', p / 'new.db'):\n"
        "    try: opening.check_writable(path)\n"
        "    except opening.UnwritableStore as exc: print(exc.reason)\n"
    )
    proc = subprocess.run(
        as_unprivileged([sys.executable, "-c", script, str(store_dir)]),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    listed, existing, new = proc.stdout.splitlines()
    assert listed == "['run-1']"
    assert existing.startswith("read-only") and "cannot create a file there" in new


@contextlib.contextmanager
def shared_directory() -> Iterator[Path]:
    """A fresh directory another user can reach (pytest's tmp_path is owner-only);
    removed afterwards, read-only parts and all."""
    base = Path(tempfile.mkdtemp(prefix="errorflow-ro-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        for path in base.rglob("*"):
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(base)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    with shared_directory() as base:
        yield base


def as_unprivileged(argv: list[str]) -> list[str]:
    """`argv` run so that permissions apply: as nobody when this is root (which ignores
    them), through setpriv."""
    if os.geteuid() != 0:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root, and no setpriv to drop to nobody")
    drop = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    probe = subprocess.run([*drop, sys.executable, "-c", "import errorflow"], timeout=60)
    if probe.returncode != 0:
        pytest.skip("nobody cannot import errorflow from this checkout")
    return [*drop, *argv]


# -- a write the store fails ---------------------------------------------------------------


async def test_a_full_store_fails_a_write_as_the_store_and_keeps_no_half_of_it(
    tmp_path: Path,
) -> None:
    """SQLite's own limit (the disk full, without root): the batch is refused whole,
    said as the store's failure, and a later write commits nothing of it; a run's own
    row on a store that went read-only is refused so too."""
    db_path = tmp_path / "full.db"
    await new_run(db_path)
    db = await open_db(db_path)
    try:
        ((pages,),) = await db.execute_fetchall("PRAGMA page_count")
        await db.execute_fetchall(f"PRAGMA max_page_count = {pages}")
        rows = [MessageRow.from_envelope(envelope(id=f"m{i}"), "t", 1.0) for i in range(300)]
        with pytest.raises(failures.StoreFailed) as failed:
            await insert_rows(db, rows, [], [], [], [])
        assert str(failed.value) == f"store {db_path}: database or disk is full (SQLITE_FULL)"
        await db.execute_fetchall("PRAGMA query_only = 1")  # and a run's own rows, read-only
        with pytest.raises(failures.StoreFailed, match=r"readonly database \(SQLITE_READONLY\)$"):
            await create_run(
                db, run_id="run-2", scenario="s", scenario_json="{}", seed=1, trials=1,
                propagation="explicit", broker="embedded",
            )  # fmt: skip
        await db.execute_fetchall("PRAGMA query_only = 0")
        await db.execute_fetchall(f"PRAGMA max_page_count = {pages * 100}")
        await finish_run(db, "run-1", "interrupted", summarize([]))
    finally:
        await db.close()
    with connect_ro(db_path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
        assert [r[0] for r in conn.execute("SELECT run_id FROM runs")] == ["run-1"]


async def test_a_batch_that_fails_is_rolled_back_not_left_for_the_next_commit(
    tmp_path: Path,
) -> None:
    """Its messages went in before its trial row failed: the run's next write (closing
    the run) must not commit them, half a batch."""
    db_path = tmp_path / "half.db"
    await new_run(db_path)
    db = await open_db(db_path)
    try:
        bad = TrialRow("run-1", 0, None, 0, "", "{}")  # type: ignore[arg-type]
        with pytest.raises(sqlite3.IntegrityError):  # a bug, not the store: as it is
            await insert_rows(
                db, [MessageRow.from_envelope(envelope(), "t", 1.0)], [], [], [bad], []
            )
        await finish_run(db, "run-1", "interrupted", summarize([]))
    finally:
        await db.close()
    with connect_ro(db_path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0


def test_only_the_stores_own_failures_are_said_as_the_store() -> None:
    def error(kind: type[sqlite3.Error], message: str, code: int, name: str) -> sqlite3.Error:
        exc = kind(message)
        exc.sqlite_errorcode, exc.sqlite_errorname = code, name
        return exc

    io = error(sqlite3.OperationalError, "disk I/O error", 778, "SQLITE_IOERR_WRITE")
    assert failures.store_fault(io) == "disk I/O error (SQLITE_IOERR_WRITE)"
    ro = error(
        sqlite3.OperationalError, "attempt to write a readonly database", 8, "SQLITE_READONLY"
    )
    assert failures.store_fault(ro) == "attempt to write a readonly database (SQLITE_READONLY)"
    assert (
        failures.store_fault(error(sqlite3.OperationalError, "no such table: x", 1, "SQLITE_ERROR"))
        is None
    )
    assert (
        failures.store_fault(
            error(sqlite3.IntegrityError, "NOT NULL", 1299, "SQLITE_CONSTRAINT_NOTNULL")
        )
        is None
    )
    assert failures.store_fault(OSError("disk full")) is None


async def test_a_store_whose_file_went_away_is_noticed(tmp_path: Path) -> None:
    """SQLite writes on into a file removed (or whose directory was), with no error."""
    db_path = tmp_path / "d" / "s.db"
    await new_run(db_path)
    db = await open_db(db_path)
    try:
        file = await failures.store_file(db)
        assert file is not None
        failures.check_in_place(file)  # where it was
        db_path.rename(db_path.with_name("moved.db"))
        db_path.write_bytes(b"")
        with pytest.raises(failures.StoreFailed, match="replaced by another") as replaced:
            failures.check_in_place(file)
        shutil.rmtree(db_path.parent)
        with pytest.raises(failures.StoreFailed, match=r"removed while .*No such file") as removed:
            failures.check_in_place(file)
        assert replaced.value.gone and removed.value.gone
        stopped = await failures.stopped_by(db, db_path, "run-1", 4, removed.value)
        assert str(stopped) == f"store {db_path}: {removed.value.reason}; run run-1 stopped"
    finally:
        await db.close()


async def test_resuming_forgets_what_trials_stopped_mid_way_left(tmp_path: Path) -> None:
    """Trial 1 was under way when its run stopped (its task, an event and a label are
    stored, no outcome): it runs again on `--resume`, so its first rows go; trial 0
    (scored) and the run's control messages stay."""
    db_path = tmp_path / "r.db"
    await new_run(db_path)
    control = envelope(Kind.CONTROL, id="c1", trial=1, payload={"action": "ack"})
    rows = [
        MessageRow.from_envelope(envelope(id="t0", trial=0, kind=Kind.TASK), "t", 1.0),
        MessageRow.from_envelope(envelope(id="r0", trial=0), "t", 1.0),
        MessageRow.from_envelope(envelope(id="t1", trial=1, kind=Kind.TASK), "t", 1.0),
        MessageRow.from_envelope(control, "t", 1.0),
    ]
    events = [
        EventRow.from_envelope(envelope(Kind.EVENT, id=f"e{t}", trial=t), 1.0) for t in (0, 1)
    ]
    label = MessageLabel("t1", "runner", Label.CLEAN, "", touched=False)
    db = await open_db(db_path)
    try:
        await insert_rows(
            db, rows, events, [], [TrialRow.from_score("run-1", SCORES[0])],
            [LabelRow.from_label("run-1", 1, label)],
        )  # fmt: skip
        await finish_run(db, "run-1", "interrupted", summarize([]))
        await resume_run(db, "run-1")
    finally:
        await db.close()
    with connect_ro(db_path) as conn:
        kept = sorted(r[0] for r in conn.execute("SELECT id FROM messages"))
        assert kept == ["c1", "r0", "t0"]
        assert [r[0] for r in conn.execute("SELECT id FROM events")] == ["e0"]
        assert conn.execute("SELECT COUNT(*) FROM labels").fetchone()[0] == 0
