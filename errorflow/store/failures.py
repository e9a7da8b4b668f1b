"""A write the store fails (the disk full, an I/O error, the file read-only, removed or
replaced): rolled back, and said as the store's fault, with how much of the run is
stored."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import NamedTuple

import aiosqlite

from errorflow.core.errors import ErrorflowError


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
    except Exception as exc:  # a value sqlite3 cannot bind leaves the transaction open too
        with contextlib.suppress(Exception):
            await db.rollback()
        if not isinstance(exc, sqlite3.Error):
            raise
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
        said = f"the file was removed while the run wrote it ({os_reason(exc)})"
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


def os_reason(exc: OSError) -> str:
    return exc.strerror if exc.strerror else str(exc)
