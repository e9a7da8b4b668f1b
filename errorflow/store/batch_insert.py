"""A batch of a run's rows written in one call into the store's thread, many rows a
statement.

Row by row (`executemany`), the store's thread lets go of Python's lock around each
row's step and has to win it back from the run, which holds it while it works: beside a
busy run a batch took many times as long as alone, and the recorder, waiting for it, held
the publishers back while the run's own thread sat idle. A statement of a few hundred
rows (`INSERT ... VALUES (...), (...)`) binds them all at once and inserts them in one
step without the lock; the whole batch is one function in the store's thread (one round
trip through the event loop, not one a statement). The values are bound as sqlite3 binds
them row by row: the same types, every float and text exact.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator, Sequence

import aiosqlite

from errorflow.store.failures import writing
from errorflow.store.rows import EventRow, LabelRow, MessageRow, RejectRow, TrialRow

#: Rows a statement, at most: more cost SQLite more to prepare than they save.
ROWS_A_STATEMENT = 500

#: The fewest bound values a statement may hold in any SQLite (before 3.32).
OLDEST_LIMIT = 999
#: A batch's rows, table by table: messages, events, rejects, trials, labels, root causes
#: (`root_causes.row_of` rows).
Batch = tuple[
    Sequence[MessageRow],
    Sequence[EventRow],
    Sequence[RejectRow],
    Sequence[TrialRow],
    Sequence[LabelRow],
    Sequence[tuple[object, ...]],
]


def statements(limit: int, batch: Batch) -> Iterator[tuple[str, list[object]]]:
    """The batch's INSERTs, a few hundred rows each, within `limit` values a statement.
    A message or event already stored is kept (the runner's copies repeat what the
    recorder has); a trial, label or root cause (`root_causes.row_of` rows) replaced."""
    messages, events, rejects, trials, labels, causes = batch
    tables: tuple[tuple[str, str, Sequence[Sequence[object]]], ...] = (
        ("OR IGNORE", "messages", messages),
        ("OR IGNORE", "events", events),
        ("", "rejects", rejects),
        ("OR REPLACE", "trials", trials),
        ("OR REPLACE", "labels", labels),
        ("OR REPLACE", "root_causes", causes),
    )
    for verb, table, rows in tables:
        if not rows:
            continue
        width = len(rows[0])
        row = f"({','.join('?' * width)})"
        start = 0
        for size in _sizes(len(rows), max(1, min(ROWS_A_STATEMENT, limit // width))):
            part = rows[start : start + size]
            start += size
            values = ",".join(itertools.repeat(row, size))
            yield f"INSERT {verb} INTO {table} VALUES {values}", [*itertools.chain(*part)]


def _sizes(n: int, most: int) -> Iterator[int]:
    """`n` rows as statements of `most` rows, then of powers of two: a statement is
    prepared once for each number of rows and kept in sqlite3's cache, so the numbers
    must be few (a statement of hundreds of rows holds a large program)."""
    full, rest = divmod(n, most)
    yield from itertools.repeat(most, full)
    while rest:
        size = 1 << (rest.bit_length() - 1)
        yield size
        rest -= size


def write_batch(conn: sqlite3.Connection, batch: Batch) -> None:
    """One batch in one transaction, on the connection's own thread: all of it or, if
    anything fails (SQLite, or a value sqlite3 cannot bind), none of it, rolled back
    there before anything else queued on the connection can commit half of it."""
    try:
        for sql, values in statements(conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER), batch):
            conn.execute(sql, values)
        conn.commit()
    except BaseException:
        conn.rollback()
        raise


async def insert_rows(
    db: aiosqlite.Connection,
    messages: Sequence[MessageRow],
    events: Sequence[EventRow],
    rejects: Sequence[RejectRow],
    trials: Sequence[TrialRow],
    labels: Sequence[LabelRow],
    causes: Sequence[tuple[object, ...]] = (),
) -> None:
    """One batch, one transaction, from the event loop (a failed one rolled back).
    `write_batch` is queued on aiosqlite's thread as one call through `_execute`, what
    each of aiosqlite's own methods does (it has no public way to queue a function);
    without it, statement by statement through the public API."""
    batch = (messages, events, rejects, trials, labels, causes)
    async with writing(db):
        queue = getattr(db, "_execute", None)
        if queue is not None:
            await queue(write_batch, db._conn, batch)
            return
        for sql, values in statements(OLDEST_LIMIT, batch):
            await db.execute(sql, values)
        await db.commit()
