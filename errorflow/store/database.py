"""The SQLite store: runs, messages, events, rejected messages, labels and trial outcomes.

One writer (the recorder) batches inserts in WAL mode; readers (`errorflow runs`,
`show`, `report`, the TUI's replay) open their own connections. Every envelope is
stored whole as JSON next to the columns we query by.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import socket
import sqlite3
import stat
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal, NamedTuple, Self, TypedDict

import aiosqlite

from errorflow.bus.redaction import holds_secret
from errorflow.core.costs import Costs
from errorflow.core.errors import ErrorflowError, InputError, clipped
from errorflow.core.redact import redact, redact_json
from errorflow.protocol.envelope import Envelope
from errorflow.protocol.events import event_type
from errorflow.scoring.score import MessageLabel, Outcome, TrialScore
from errorflow.scoring.summary import RunSummary

DEFAULT_DB = Path("errorflow.db")
DB_ENV = "ERRORFLOW_DB"


def default_db() -> Path:
    """The store a command uses without `--db`: `$ERRORFLOW_DB`, else ./errorflow.db."""
    return Path(os.environ.get(DB_ENV) or DEFAULT_DB)


class StoreError(ErrorflowError, RuntimeError):
    """Rows could not be written: the run is incomplete in the store."""


class StoreFailed(StoreError):
    """The store failed a write while a run was on (the disk full, an I/O error, the file
    read-only, removed or replaced): an infrastructure fault, which measured nothing.
    `reason` is SQLite's or the OS's words; `run` what became of the run; `gone`: the
    path no longer leads to the file written."""

    def __init__(self, path: str, reason: str, run: str = "", *, gone: bool = False) -> None:
        self.path, self.reason, self.run, self.gone = path, reason, run, gone
        super().__init__(f"store {path}: {reason}" + (f"; {run}" if run else ""))


SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, scenario TEXT NOT NULL, scenario_json TEXT NOT NULL,
    seed INTEGER NOT NULL, trials INTEGER NOT NULL, propagation TEXT NOT NULL,
    broker TEXT, status TEXT NOT NULL, started REAL NOT NULL, finished REAL,
    summary_json TEXT, group_id TEXT, label TEXT, pid INTEGER, host TEXT,
    scenario_sha TEXT, scenario_exact INTEGER, truth_json TEXT
);
CREATE TABLE IF NOT EXISTS messages (
    run_id TEXT NOT NULL, id TEXT NOT NULL, trial INTEGER NOT NULL, seq INTEGER NOT NULL,
    sender TEXT NOT NULL, recipient TEXT NOT NULL, kind TEXT NOT NULL, status TEXT NOT NULL,
    confidence REAL NOT NULL, topic TEXT NOT NULL, envelope TEXT NOT NULL, received REAL NOT NULL,
    PRIMARY KEY (run_id, id)
);
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL, id TEXT NOT NULL, trial INTEGER NOT NULL, seq INTEGER NOT NULL,
    sender TEXT NOT NULL, type TEXT NOT NULL, envelope TEXT NOT NULL, received REAL NOT NULL,
    PRIMARY KEY (run_id, id)
);
CREATE TABLE IF NOT EXISTS rejects (
    run_id TEXT NOT NULL, topic TEXT NOT NULL, reason TEXT NOT NULL, detail TEXT NOT NULL,
    raw BLOB NOT NULL, received REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS labels (
    run_id TEXT NOT NULL, trial INTEGER NOT NULL, message_id TEXT NOT NULL, sender TEXT NOT NULL,
    label TEXT NOT NULL, reason TEXT NOT NULL, PRIMARY KEY (run_id, message_id)
);
CREATE TABLE IF NOT EXISTS trials (
    run_id TEXT NOT NULL, trial INTEGER NOT NULL, outcome TEXT NOT NULL, depth INTEGER NOT NULL,
    reason TEXT NOT NULL, costs_json TEXT NOT NULL, PRIMARY KEY (run_id, trial)
);
CREATE INDEX IF NOT EXISTS messages_trial ON messages (run_id, trial);
CREATE INDEX IF NOT EXISTS events_trial ON events (run_id, trial);
"""


# -- rows: the one place a table's column order is written down ------------------------
#
# NamedTuples: named fields for readers, a tuple for sqlite3 (`insert_rows` hands it
# plain ones). Built with `tuple.__new__`: the recorder makes one per envelope, and the
# generated keyword constructor costs 5 % of its handling time. Their text is redacted
# as they are built, whoever sent it: a secret a sender let through is not stored.

_new_row = tuple.__new__


def _stored(env: Envelope, text: str) -> str:
    return redact_json(text) if holds_secret(env, text, ids=True) else text


class MessageRow(NamedTuple):
    run_id: str
    id: str
    trial: int
    seq: int
    sender: str
    recipient: str
    kind: str
    status: str
    confidence: float
    topic: str
    envelope: str  # the whole envelope as JSON
    received: float

    @classmethod
    def from_envelope(
        cls, env: Envelope, topic: str, received: float, text: str | None = None
    ) -> Self:
        """`text`: the envelope's JSON as it came off the wire, if at hand (the recorder
        has it; encoding it again would cost the recorder's hot path)."""
        return _new_row(
            cls,
            (
                env.run_id,
                env.id,
                env.trial,
                env.seq,
                env.sender,
                env.recipient,
                env.kind.value,
                env.status.value,
                env.confidence,
                topic,
                _stored(env, env.encode().decode() if text is None else text),
                received,
            ),
        )


class EventRow(NamedTuple):
    run_id: str
    id: str
    trial: int
    seq: int
    sender: str
    type: str  # the event's kind, as on the wire (unknown kinds are stored too)
    envelope: str
    received: float

    @classmethod
    def from_envelope(cls, env: Envelope, received: float, text: str | None = None) -> Self:
        return _new_row(
            cls,
            (
                env.run_id,
                env.id,
                env.trial,
                env.seq,
                env.sender,
                event_type(env.payload),
                _stored(env, env.encode().decode() if text is None else text),
                received,
            ),
        )


class RejectRow(NamedTuple):
    run_id: str
    topic: str
    reason: str
    detail: str
    raw: bytes
    received: float


class LabelRow(NamedTuple):
    run_id: str
    trial: int
    message_id: str
    sender: str
    label: str
    reason: str

    @classmethod
    def from_label(cls, run_id: str, trial: int, label: MessageLabel) -> Self:
        return cls(
            run_id, trial, label.message_id, label.sender, label.label.value, redact(label.reason)
        )


class TrialRow(NamedTuple):
    run_id: str
    trial: int
    outcome: str
    depth: int
    reason: str
    costs_json: str

    @classmethod
    def from_score(cls, run_id: str, score: TrialScore) -> Self:
        return cls(
            run_id,
            score.trial,
            score.outcome.value,
            score.depth,
            redact(score.reason),
            redact_json(json.dumps(score.costs.to_wire())),
        )


async def insert_rows(
    db: aiosqlite.Connection,
    messages: list[MessageRow],
    events: list[EventRow],
    rejects: list[RejectRow],
    trials: list[TrialRow],
    labels: list[LabelRow],
) -> None:
    """One batch, one transaction. A message or event already stored is kept (the
    runner's backfill repeats what the recorder has); a trial or label is replaced.
    Rows are bound as plain tuples: sqlite3 binds a tuple subclass item by item through
    the sequence protocol, slower on the recorder's batches."""
    async with writing(db):
        await db.executemany(
            "INSERT OR IGNORE INTO messages VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", map(tuple, messages)
        )
        await db.executemany(
            "INSERT OR IGNORE INTO events VALUES (?,?,?,?,?,?,?,?)", map(tuple, events)
        )
        await db.executemany("INSERT INTO rejects VALUES (?,?,?,?,?,?)", rejects)
        await db.executemany("INSERT OR REPLACE INTO trials VALUES (?,?,?,?,?,?)", trials)
        await db.executemany("INSERT OR REPLACE INTO labels VALUES (?,?,?,?,?,?)", labels)
        await db.commit()


# -- a write the store fails: rolled back, and said as the store's fault ----------------

#: SQLite's primary result codes that say the store, not errorflow, failed a write.
_STORE_FAULTS = frozenset(
    {
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PERM,
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_CORRUPT,
        sqlite3.SQLITE_NOTADB,
    }
)


def store_fault(exc: BaseException) -> str | None:
    """SQLite's words for an error that is the store's fault, with its extended code
    (`disk I/O error (SQLITE_IOERR_WRITE)`); None for any other (a bug keeps its
    traceback)."""
    if not isinstance(exc, sqlite3.Error):
        return None
    if getattr(exc, "sqlite_errorcode", 0) & 0xFF not in _STORE_FAULTS:
        return None
    name = getattr(exc, "sqlite_errorname", "")
    said = str(exc).strip() or type(exc).__name__
    return f"{said} ({name})" if name else said


@contextlib.asynccontextmanager
async def writing(db: aiosqlite.Connection) -> AsyncIterator[None]:
    """One write transaction. One that fails is rolled back: SQLite may keep what the
    failed transaction had done pending, and the next commit would store half a batch.
    A failure of the store itself is raised as `StoreFailed`."""
    try:
        yield
    except sqlite3.Error as exc:
        with contextlib.suppress(Exception):
            await db.rollback()
        reason = store_fault(exc)
        if reason is None:
            raise
        raise StoreFailed(await file_of(db), reason) from exc


async def file_of(db: aiosqlite.Connection) -> str:
    """The path of the file the connection writes ('' for an in-memory store)."""
    with contextlib.suppress(Exception):
        for _, name, path in await db.execute_fetchall("PRAGMA database_list"):
            if name == "main":
                return str(path)
    return ""


class StoreFile(NamedTuple):
    """The file a connection writes: its path, and the file that path led to when the
    run began (device and inode)."""

    path: str
    dev: int
    ino: int


async def store_file(db: aiosqlite.Connection) -> StoreFile | None:
    """The file `db` writes, as its path leads to it now (None: an in-memory store)."""
    path = await file_of(db)
    if not path:
        return None
    info = os.stat(path)
    return StoreFile(path, info.st_dev, info.st_ino)


def check_in_place(file: StoreFile) -> None:
    """`StoreFailed` unless the path still leads to the file being written. SQLite goes
    on writing a file that was removed (or whose directory was) without an error, and
    all of it vanishes when the process exits."""
    try:
        info = os.stat(file.path)
    except OSError as exc:
        said = f"the file was removed while the run wrote it ({_os_reason(exc)})"
        raise StoreFailed(file.path, said, gone=True) from None
    if (info.st_dev, info.st_ino) != (file.dev, file.ino):
        said = "the file was replaced by another while the run wrote it"
        raise StoreFailed(file.path, said, gone=True)


async def stopped_by(
    db: aiosqlite.Connection, path: Path, run_id: str, trials: int, failure: StoreFailed
) -> StoreFailed:
    """What a run its store failed ends with: the failure, said of the store the user
    named, and how much of the run is stored (`--resume` runs the rest). Only reads."""
    if failure.gone or not path.exists():
        return StoreFailed(str(path), failure.reason, f"run {run_id} stopped")
    try:
        sql = "SELECT COUNT(*) FROM trials WHERE run_id = ?"
        ((count,),) = await db.execute_fetchall(sql, (run_id,))
        stored = f" with {count} of {trials} trials stored"
    except Exception:  # the store may not even read: the failure is the news
        stored = ""
    return StoreFailed(str(path), failure.reason, f"run {run_id} stopped{stored}")


# -- opening: a path that cannot hold the store says so at once, and leaves nothing open --

#: How long opening waits for a lock another process holds before it says so (the CLI
#: answers a locked store in one line within 5 s). A run's own writes wait longer.
OPEN_TIMEOUT_S = 1.0
WRITE_TIMEOUT_S = 5.0  # sqlite3's default
MIN_DB_BYTES = 512  # the smallest page: a database that is not empty is one page or more


class UnusableStore(InputError, sqlite3.DatabaseError):
    """The database at `path` cannot be used as asked: `reason` says why in a few words,
    `expected` what would do. Raised before anything is read or written. (A
    `sqlite3.DatabaseError`: what caught SQLite's own error on opening catches it.)"""

    def __init__(self, path: Path, reason: str, expected: str) -> None:
        self.path, self.reason, self.expected = path, reason, expected
        self.where = f"--db {path}"
        super().__init__(f"cannot use the database at {path}: {reason}; expected {expected}")

    @property
    def text(self) -> str:
        return f"{clipped(self.where)}: {self.reason}; expected {self.expected}"


class UnwritableStore(UnusableStore):
    """The database cannot be created or written where it was asked for."""

    def __init__(self, path: Path, reason: str, expected: str = "a writable location") -> None:
        super().__init__(path, reason, expected)


def _check_file(path: Path, writing: bool) -> None:
    """What can be told without SQLite, from `stat` alone: a directory, a special file
    (a FIFO would block SQLite's read), a file too short to be a database (SQLite takes
    one under 100 bytes for an empty database, and would write over it). The file is
    never opened here: closing any descriptor of it would drop the POSIX locks of this
    process's SQLite connections to it. SQLite itself refuses a longer file that is not
    a database (`file is not a database`)."""
    error = UnwritableStore if writing else UnusableStore
    try:
        info = path.stat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise error(path, _os_reason(exc), "a path this user can reach") from None
    if stat.S_ISDIR(info.st_mode):
        raise error(path, "it is a directory", f"a file path, e.g. {path / DEFAULT_DB}")
    if not stat.S_ISREG(info.st_mode):
        raise error(path, "not a regular file", "an SQLite database file")
    if 0 < info.st_size < MIN_DB_BYTES:
        raise error(
            path,
            f"not an SQLite database ({info.st_size} bytes)",
            "a store `errorflow run` wrote, or a path with no file yet",
        )


def _ready_to_write(path: Path) -> None:
    """`path` can take the store's writes: checked, opened with a bounded wait for
    another process's lock, its schema read and the write lock taken and released."""
    _check_file(path, writing=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.closing(sqlite3.connect(path, timeout=OPEN_TIMEOUT_S)) as conn:
            conn.execute("PRAGMA schema_version").fetchone()
            conn.execute("BEGIN IMMEDIATE")  # the write lock: busy or read-only fails here
            conn.rollback()
    except OSError as exc:
        raise UnwritableStore(path, f"cannot write there ({_os_reason(exc)})") from None
    except sqlite3.Error as exc:
        raise _unusable(path, exc, writing=True) from None


def _unusable(path: Path, exc: sqlite3.Error, writing: bool) -> UnusableStore:
    """What an SQLite error on opening means for the user, in their words."""
    error = UnwritableStore if writing else UnusableStore
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF  # the primary result code
    said = str(exc).strip() or type(exc).__name__
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return error(
            path,
            f"locked by another process (still after {OPEN_TIMEOUT_S:g}s)",
            "it unlocked: wait for that process to finish, or use another --db",
        )
    if code == sqlite3.SQLITE_READONLY:
        return error(path, f"read-only ({said})", "a writable location")
    if code == sqlite3.SQLITE_NOTADB:
        return error(path, f"not an SQLite database ({said})", "a store `errorflow run` wrote")
    if code == sqlite3.SQLITE_CORRUPT:
        return error(path, f"a damaged SQLite database ({said})", "a store `errorflow run` wrote")
    if writing:
        return error(path, f"cannot write a database there ({said})", "a writable location")
    return error(path, f"cannot read it ({said})", "a readable SQLite database")


def _os_reason(exc: OSError) -> str:
    return exc.strerror if exc.strerror else str(exc)


async def open_db(path: Path) -> aiosqlite.Connection:
    """The store at `path`, created or brought up to date. A path that cannot hold it
    raises `UnwritableStore` within `OPEN_TIMEOUT_S`; whatever fails, no connection (and
    no aiosqlite thread, which would keep the process alive) is left open."""
    await asyncio.to_thread(_ready_to_write, path)
    db = await aiosqlite.connect(path, timeout=WRITE_TIMEOUT_S)
    try:
        await _migrate(db)
    except BaseException as exc:
        with contextlib.suppress(Exception):
            await db.close()
        if isinstance(exc, sqlite3.Error):
            raise _unusable(path, exc, writing=True) from None
        raise
    return db


async def _migrate(db: aiosqlite.Connection) -> None:
    await db.execute("PRAGMA journal_mode=WAL")
    await db.execute("PRAGMA synchronous=NORMAL")
    await db.executescript(SCHEMA)
    # Databases written by an earlier version lack the newer columns: add them.
    columns = {row[1] for row in await db.execute_fetchall("PRAGMA table_info(runs)")}
    for column, sql_type in (
        ("group_id", "TEXT"),
        ("label", "TEXT"),
        ("pid", "INTEGER"),
        ("host", "TEXT"),
        ("scenario_sha", "TEXT"),
        ("scenario_exact", "INTEGER"),
        ("truth_json", "TEXT"),
    ):
        if column not in columns:
            await db.execute(f"ALTER TABLE runs ADD COLUMN {column} {sql_type}")
    await db.commit()


async def create_run(
    db: aiosqlite.Connection,
    *,
    run_id: str,
    scenario: str,
    scenario_json: str,
    seed: int,
    trials: int,
    propagation: str,
    broker: str,
    group_id: str | None = None,
    label: str | None = None,
    scenario_sha: str | None = None,
    scenario_exact: bool = True,
    truth_json: str | None = None,
) -> None:
    """`scenario_json` is the redacted scenario; `scenario_exact` says whether redaction
    left it unchanged (then `--resume` can run from it) and `scenario_sha` identifies
    the exact scenario (otherwise `--resume` needs the original file to match it).
    `truth_json`: each need's true value as the scorer has it (redacted), kept because
    the stored scenario cannot compute it again (its Python tools' paths are redacted)."""
    async with writing(db):
        await db.execute(
            "INSERT INTO runs (run_id, scenario, scenario_json, seed, trials, propagation, broker,"
            " status, started, group_id, label, pid, host, scenario_sha, scenario_exact,"
            " truth_json) VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run_id,
                scenario,
                scenario_json,
                seed,
                trials,
                propagation,
                broker,
                time.time(),
                group_id,
                label,
                os.getpid(),
                socket.gethostname(),
                scenario_sha,
                int(scenario_exact),
                truth_json,
            ),
        )
        await db.commit()


#: The trials of a run with rows but no outcome stored: stopped mid-trial.
_UNSCORED = (
    "trial IN (SELECT trial FROM {table} WHERE run_id = ?1"
    " EXCEPT SELECT trial FROM trials WHERE run_id = ?1)"
)
#: What a trial stopped mid-way left, which its run again on `--resume` would double
#: (its first task and the results it got, next to the new ones: a different trace).
_FORGET_UNSCORED = (
    "DELETE FROM messages WHERE run_id = ?1 AND kind IN ('task', 'result') AND "
    + _UNSCORED.format(table="messages"),
    "DELETE FROM events WHERE run_id = ?1 AND " + _UNSCORED.format(table="events"),
    "DELETE FROM labels WHERE run_id = ?1 AND " + _UNSCORED.format(table="labels"),
)


async def resume_run(db: aiosqlite.Connection, run_id: str) -> None:
    """Take over an interrupted run: it is ours (this process) and running again, and
    the trials it left unscored start afresh (they run again), as if never begun."""
    async with writing(db):
        await db.execute(
            "UPDATE runs SET status = 'running', finished = NULL, pid = ?, host = ?"
            " WHERE run_id = ?",
            (os.getpid(), socket.gethostname(), run_id),
        )
        for sql in _FORGET_UNSCORED:
            await db.execute(sql, (run_id,))
        await db.commit()


async def finish_run(
    db: aiosqlite.Connection, run_id: str, status: str, summary: RunSummary
) -> None:
    async with writing(db):
        await db.execute(
            "UPDATE runs SET status = ?, finished = ?, summary_json = ? WHERE run_id = ?",
            (status, time.time(), json.dumps(summary), run_id),
        )
        await db.commit()


# -- readers (synchronous: used by the CLI and reports, never on the hot path) ------


def connect_ro(path: Path) -> sqlite3.Connection:
    """A read-only connection; a path that holds no readable store raises
    `UnusableStore` (FileNotFoundError when there is nothing there) within
    `OPEN_TIMEOUT_S`."""
    _check_file(path, writing=False)
    if not path.exists():
        raise FileNotFoundError(f"no database at {path} (run `errorflow run` first, or pass --db)")
    try:
        conn = _open_ro(path, immutable=False)
    except sqlite3.Error as exc:
        if not _frozen(path, exc):
            raise _unusable(path, exc, writing=False) from None
        try:  # a WAL store in a read-only directory: no one can be writing it
            conn = _open_ro(path, immutable=True)
        except sqlite3.Error as again:
            raise _unusable(path, again, writing=False) from None
    conn.row_factory = sqlite3.Row
    return conn


def _open_ro(path: Path, immutable: bool) -> sqlite3.Connection:
    """Opened and its schema read (SQLite reads nothing until asked: a lock or a damaged
    file shows here, not in the caller's first query)."""
    uri = path.resolve().as_uri() + ("?immutable=1" if immutable else "?mode=ro")
    conn = sqlite3.connect(uri, uri=True, timeout=OPEN_TIMEOUT_S)
    try:
        conn.execute("PRAGMA schema_version").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn


def _frozen(path: Path, exc: sqlite3.Error) -> bool:
    """A WAL store SQLite cannot read in place only because it may not create its
    shared-memory file (a read-only directory) and with no unmerged writes: it can be
    read as immutable."""
    if getattr(exc, "sqlite_errorcode", 0) & 0xFF != sqlite3.SQLITE_READONLY:
        return False
    try:
        return path.with_name(path.name + "-wal").stat().st_size == 0
    except FileNotFoundError:
        return True
    except OSError:
        return False


class RunListing(TypedDict):
    """One line of `errorflow runs`."""

    run_id: str
    scenario: str
    seed: int
    trials: int
    propagation: str
    status: str
    started: float
    finished: float | None
    group_id: str | None
    label: str | None


class TrialRecord(TypedDict):
    """A stored trial outcome; `costs` is `costs_json` read."""

    trial: int
    outcome: str
    depth: int
    reason: str
    costs_json: str
    costs: dict[str, float]


def effective_status(status: str, pid: int | None, host: str | None) -> str:
    """`running` in the store but its process is gone from this host: interrupted."""
    if status != "running":
        return str(status)
    if not pid or host != socket.gethostname():
        return "running"
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return "interrupted"
    except PermissionError:
        return "running"
    return "running"


def list_runs(path: Path) -> list[RunListing]:
    with connect_ro(path) as conn:
        rows = conn.execute(
            "SELECT run_id, scenario, seed, trials, propagation, status, started, finished,"
            " group_id, label, pid, host FROM runs ORDER BY started DESC"
        ).fetchall()
    return [
        RunListing(
            run_id=r["run_id"],
            scenario=r["scenario"],
            seed=r["seed"],
            trials=r["trials"],
            propagation=r["propagation"],
            status=effective_status(r["status"], r["pid"], r["host"]),
            started=r["started"],
            finished=r["finished"],
            group_id=r["group_id"],
            label=r["label"],
        )
        for r in rows
    ]


class StoredCounts(TypedDict):
    """How many rows of each kind a run has in the store."""

    messages: int
    events: int
    rejects: int
    trials: int


class StoredRun(TypedDict):
    """One run as the store holds it: its row, its summary read, and its row counts."""

    run_id: str
    scenario: str
    scenario_json: str  # redacted (see `scenario_exact`)
    seed: int
    trials: int
    propagation: str
    broker: str | None
    status: str  # `running` whose process is gone reads `interrupted`
    started: float
    finished: float | None
    summary: RunSummary | None  # None until the run finishes or is interrupted
    group_id: str | None
    label: str | None
    pid: int | None
    host: str | None
    scenario_sha: str | None
    scenario_exact: int | None
    #: Each need's true value (redacted); None for a run stored before it was kept.
    truth: dict[str, Any] | None
    counts: StoredCounts
    rejects_by_reason: dict[str, int]


def get_run(path: Path, run_id: str) -> StoredRun | None:
    """A run by id, or by a prefix only one run id has (None otherwise)."""
    with connect_ro(path) as conn:
        row = conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            matches = conn.execute(
                "SELECT * FROM runs WHERE substr(run_id, 1, length(?)) = ? ORDER BY started DESC",
                (run_id, run_id),
            ).fetchall()
            if len(matches) != 1:
                return None
            row = matches[0]
        return _stored_run(conn, row)


def _stored_run(conn: sqlite3.Connection, row: sqlite3.Row) -> StoredRun:
    rid = row["run_id"]

    def count(table: str) -> int:
        sql = f"SELECT COUNT(*) FROM {table} WHERE run_id = ?"
        return int(conn.execute(sql, (rid,)).fetchone()[0])

    rejects = conn.execute(
        "SELECT reason, COUNT(*) FROM rejects WHERE run_id = ? GROUP BY reason", (rid,)
    ).fetchall()
    return StoredRun(
        run_id=rid,
        scenario=row["scenario"],
        scenario_json=row["scenario_json"],
        seed=row["seed"],
        trials=row["trials"],
        propagation=row["propagation"],
        broker=row["broker"],
        status=effective_status(row["status"], row["pid"], row["host"]),
        started=row["started"],
        finished=row["finished"],
        summary=json.loads(row["summary_json"] or "null"),
        group_id=row["group_id"],
        label=row["label"],
        pid=row["pid"],
        host=row["host"],
        scenario_sha=row["scenario_sha"],
        scenario_exact=row["scenario_exact"],
        truth=json.loads(row["truth_json"]) if row["truth_json"] else None,
        counts=StoredCounts(
            messages=count("messages"),
            events=count("events"),
            rejects=count("rejects"),
            trials=count("trials"),
        ),
        rejects_by_reason={str(reason): int(n) for reason, n in rejects},
    )


def trial_rows(path: Path, run_id: str) -> list[TrialRecord]:
    with connect_ro(path) as conn:
        rows = conn.execute(
            "SELECT trial, outcome, depth, reason, costs_json FROM trials WHERE run_id = ?"
            " ORDER BY trial",
            (run_id,),
        ).fetchall()
    return [
        TrialRecord(
            trial=r["trial"],
            outcome=r["outcome"],
            depth=r["depth"],
            reason=r["reason"],
            costs_json=r["costs_json"],
            costs=json.loads(r["costs_json"]),
        )
        for r in rows
    ]


def group_runs(path: Path, group_id: str) -> list[StoredRun]:
    """The runs of a group (a paired comparison or a sweep), in the order they ran."""
    with connect_ro(path) as conn:
        rows = conn.execute(
            "SELECT * FROM runs WHERE group_id = ? ORDER BY started", (group_id,)
        ).fetchall()
        return [_stored_run(conn, row) for row in rows]


# -- ids: what a user types (a whole id or a unique prefix) -----------------------------


class IdLookupError(InputError, LookupError):
    """An id the store cannot resolve to exactly one run or group."""

    def __init__(self, ident: str, candidates: list[str]) -> None:
        self.ident, self.candidates = ident, candidates
        super().__init__(ident)


class UnknownId(IdLookupError):
    """No run or group has this id or an id starting with it."""


class AmbiguousId(IdLookupError):
    """Several ids start with this prefix (`candidates`, newest first)."""


class StoredId(NamedTuple):
    kind: Literal["run", "group"]
    id: str


def resolve_id(path: Path, ident: str, *, groups: bool = True) -> StoredId:
    """The run (or, with `groups`, the group) `ident` names: a whole id, or a prefix of
    exactly one. A prefix of one group and of runs of that group only names the group."""
    with connect_ro(path) as conn:
        runs = conn.execute(
            "SELECT run_id, group_id FROM runs WHERE substr(run_id, 1, length(?)) = ?"
            " ORDER BY started DESC",
            (ident, ident),
        ).fetchall()
        group_ids = conn.execute(
            "SELECT group_id FROM runs WHERE substr(group_id, 1, length(?)) = ?"
            " GROUP BY group_id ORDER BY MAX(started) DESC",
            (ident, ident),
        ).fetchall()
    found = [StoredId("run", str(r["run_id"])) for r in runs]
    if groups:
        found = [StoredId("group", str(g[0])) for g in group_ids] + found
    exact = [f for f in found if f.id == ident]
    if exact:
        return exact[0]
    if groups and len(group_ids) == 1 and all(r["group_id"] == group_ids[0][0] for r in runs):
        return found[0]
    if len(found) == 1:
        return found[0]
    ids = [f.id for f in found]
    raise AmbiguousId(ident, ids) if found else UnknownId(ident, ids)


def run_exists(path: Path, run_id: str) -> bool:
    if not path.exists():
        return False
    with connect_ro(path) as conn:
        return conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is not None


def check_writable(path: Path) -> None:
    """Fail now, before a run starts, if `open_db(path)` could not write there; leaves
    nothing behind (a missing database is not created, a test file is removed)."""
    _check_file(path, writing=True)
    if path.exists():
        _ready_to_write(path)
        return
    try:
        base = path.parent
        while not base.exists():
            base = base.parent
        if not base.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(base))
        fd, probe = tempfile.mkstemp(dir=base, prefix=".errorflow-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UnwritableStore(path, f"cannot create a file there ({_os_reason(exc)})") from None


def load_scores(path: Path, run_id: str, include_bus_faults: bool = False) -> dict[int, TrialScore]:
    """The trials of a run already scored (bus faults excluded unless asked: a resumed
    run reruns them)."""
    return {
        row["trial"]: TrialScore(
            row["trial"],
            Outcome(row["outcome"]),
            row["depth"],
            costs=Costs.from_wire(row["costs"]),
            reason=row["reason"],
        )
        for row in trial_rows(path, run_id)
        if include_bus_faults or row["outcome"] != Outcome.BUS_FAULT.value
    }
