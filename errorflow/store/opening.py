"""Opening the store: for the run's writes (created or brought up to date, `open_db`) or
for reading (`connect_ro`). A path that cannot hold it says so at once, in the user's
words (`UnusableStore`, `UnwritableStore`), and leaves nothing open.

One writer (the recorder) batches inserts in WAL mode; readers (`errorflow runs`,
`show`, `report`, the TUI's replay) open their own connections. Every envelope is
stored whole as JSON next to the columns we query by.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import sqlite3
import stat
import tempfile
from pathlib import Path

import aiosqlite

from errorflow.core.errors import InputError, clipped
from errorflow.store.failures import os_reason

DEFAULT_DB = Path("errorflow.db")
DB_ENV = "ERRORFLOW_DB"


def default_db() -> Path:
    """The store a command uses without `--db`: `$ERRORFLOW_DB`, else ./errorflow.db."""
    return Path(os.environ.get(DB_ENV) or DEFAULT_DB)


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
    reason TEXT NOT NULL, costs_json TEXT NOT NULL, credit_json TEXT,
    PRIMARY KEY (run_id, trial)
);
CREATE INDEX IF NOT EXISTS messages_trial ON messages (run_id, trial);
CREATE INDEX IF NOT EXISTS events_trial ON events (run_id, trial);
"""


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
        raise error(path, os_reason(exc), "a path this user can reach") from None
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
            _ours_or_empty(path, conn)
            conn.execute("BEGIN IMMEDIATE")  # the write lock: busy or read-only fails here
            conn.rollback()
    except OSError as exc:
        raise UnwritableStore(path, f"cannot write there ({os_reason(exc)})") from None
    except UnusableStore:
        raise  # said already in the user's words
    except sqlite3.Error as exc:
        raise _unusable(path, exc, writing=True) from None


def _ours_or_empty(path: Path, conn: sqlite3.Connection) -> None:
    """Another program's database is not written into: a file with tables but no
    `runs` table is not a store (a run would add its tables beside the other's)."""
    tables = [
        str(name)
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    if tables and "runs" not in tables:
        shown = ", ".join(sorted(tables)[:3]) + (", ..." if len(tables) > 3 else "")
        raise UnwritableStore(
            path,
            f"not an errorflow store (another database: its tables are {shown})",
            "a store `errorflow run` wrote, or a path with no file yet",
        )


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
    trial_columns = {row[1] for row in await db.execute_fetchall("PRAGMA table_info(trials)")}
    if "credit_json" not in trial_columns:
        await db.execute("ALTER TABLE trials ADD COLUMN credit_json TEXT")
    await db.commit()


async def tables_of(db: aiosqlite.Connection, schema: str = "main") -> set[str]:
    """The names of the tables in `schema` (an attached store's name, or `main`)."""
    rows = await db.execute_fetchall(
        f"SELECT name FROM {schema}.sqlite_master WHERE type = 'table'"
    )
    return {row[0] for row in rows}


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
        raise UnwritableStore(path, f"cannot create a file there ({os_reason(exc)})") from None


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
