"""A batch of rows, many a statement in one call into the store's thread: the same rows
as sqlite3 stores one by one, within any SQLite's limit of bound values, all or nothing."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from errorflow.protocol.envelope import Envelope, Kind, Status
from errorflow.store.batch_insert import insert_rows, statements, write_batch
from errorflow.store.opening import connect_ro, open_db
from errorflow.store.root_causes import create as create_causes
from errorflow.store.rows import EventRow, LabelRow, MessageRow, RejectRow, TrialRow
from tests.test_store import new_run

TABLES = ("messages", "events", "rejects", "trials", "labels", "root_causes")
TEXTS = ["plain", 'it\'s "quoted" \\ back', "é€😀 \u2028 line\nbreak", "a\x00b", "'); --"]


def envelope(i: int, text: str, kind: Kind, confidence: float) -> Envelope:
    return Envelope(
        run_id="run-1",
        trial=i,
        seq=10**15 + i,
        sender="writer",
        recipient="observers" if kind is Kind.EVENT else "runner",
        kind=kind,
        trace_id=f"run-1-t{i}",
        status=Status.PARTIAL_FAILURE,
        confidence=confidence,
        payload={"type": "model_call", "note": text} if kind is Kind.EVENT else {"r": text},
    )


def a_batch(n: int, seed: int) -> tuple[list[Any], ...]:
    """`n` rows a table: every kind of text, floats of every magnitude, bytes."""
    draw = random.Random(seed)
    batch: tuple[list[Any], ...] = ([], [], [], [], [], [])
    messages, events, rejects, trials, labels, causes = batch
    for i in range(n):
        text = TEXTS[i % len(TEXTS)]
        at = draw.random() * 10.0 ** draw.randint(-5, 10)
        result = envelope(i, text, Kind.RESULT, 1.0 if i % 7 == 0 else draw.random())
        messages.append(MessageRow.from_envelope(result, f"errorflow/run-1/inbox/{i}", at))
        events.append(EventRow.from_envelope(envelope(i, text, Kind.EVENT, 1.0), at))
        rejects.append(RejectRow("run-1", "t", "bad_json", text, bytes([i % 256, 0, 255]), at))
        trials.append(TrialRow("run-1", i, "contained", i % 3, text, '{"calls": 1}'))
        labels.append(LabelRow("run-1", i, result.id, "writer", "contained", text))
        causes.append(("run-1", i, "tool", "writer", None, 2, None, "timeout", 1, text, "{}"))
    return batch


def stored(db_path: Path) -> dict[str, list[tuple[object, ...]]]:
    with connect_ro(db_path) as conn:
        return {
            t: [tuple(r) for r in conn.execute(f"SELECT * FROM {t} ORDER BY rowid")] for t in TABLES
        }


async def a_store(db_path: Path) -> None:
    await new_run(db_path)
    db = await open_db(db_path)
    try:
        await create_causes(db)
    finally:
        await db.close()


def one_by_one(db_path: Path, batch: tuple[list[Any], ...]) -> None:
    """What sqlite3 stores of each row on its own (the reference)."""
    with sqlite3.connect(db_path) as conn:
        for table, rows in zip(TABLES, batch, strict=True):
            verb = "OR IGNORE" if table in ("messages", "events") else "OR REPLACE"
            verb = "" if table == "rejects" else verb
            for row in rows:
                marks = ",".join("?" * len(row))
                conn.execute(f"INSERT {verb} INTO {table} VALUES ({marks})", tuple(row))
    conn.close()


@pytest.mark.parametrize("n", [1, 250, 251, 1203])
async def test_a_batch_stores_what_one_row_at_a_time_does(tmp_path: Path, n: int) -> None:
    batch = a_batch(n, seed=n)
    await a_store(tmp_path / "a.db")
    await a_store(tmp_path / "b.db")
    db = await open_db(tmp_path / "a.db")
    try:
        await insert_rows(db, *batch)
    finally:
        await db.close()
    one_by_one(tmp_path / "b.db", batch)
    got = stored(tmp_path / "a.db")
    assert got == stored(tmp_path / "b.db")
    assert got["messages"] == [tuple(m) for m in batch[0]]  # floats to the last bit
    assert got["trials"][3 % n][4] == TEXTS[3 % n]  # a NUL kept, not cut there
    assert got["rejects"][0][4] == bytes([0, 0, 255])


def test_statements_stay_within_the_limit_of_bound_values() -> None:
    batch = a_batch(100, seed=1)
    seen: dict[str, int] = {}
    for sql, values in statements(999, batch):
        assert len(values) <= 999
        assert sql.count("?") == len(values)
        table = sql.split(" INTO ")[1].split()[0]
        seen[table] = seen.get(table, 0) + sql.count("(")
    assert seen == {t: 100 for t in TABLES}
    # SQLite built with a lower limit: still every row, a few a statement
    with sqlite3.connect(":memory:") as conn:
        conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 30)
        for table in TABLES[:1]:
            conn.execute(f"CREATE TABLE {table} (a,b,c,d,e,f,g,h,i,j,k,l, PRIMARY KEY (a, b))")
        write_batch(conn, (batch[0], [], [], [], [], []))
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 100
    conn.close()


class PublicOnly:
    """An aiosqlite connection seen through its public methods only."""

    def __init__(self, db: Any) -> None:
        self._db = db

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._db, name)


async def test_without_aiosqlites_queue_the_same_rows_go_statement_by_statement(
    tmp_path: Path,
) -> None:
    batch = a_batch(300, seed=2)
    await a_store(tmp_path / "a.db")
    db = await open_db(tmp_path / "a.db")
    try:
        await insert_rows(PublicOnly(db), *batch)  # type: ignore[arg-type]
    finally:
        await db.close()
    assert stored(tmp_path / "a.db")["messages"] == [tuple(m) for m in batch[0]]


async def test_a_batch_that_fails_stores_nothing_of_it(tmp_path: Path) -> None:
    messages, events, rejects, trials, labels, causes = a_batch(600, seed=3)
    trials[-1] = trials[-1]._replace(outcome=None)  # NOT NULL: the last statement fails
    await a_store(tmp_path / "a.db")
    db = await open_db(tmp_path / "a.db")
    try:
        with pytest.raises(sqlite3.IntegrityError):
            await insert_rows(db, messages, events, rejects, trials, labels, causes)
        await insert_rows(db, messages[:1], [], [], [], [], [])  # the store goes on
    finally:
        await db.close()
    got = stored(tmp_path / "a.db")
    assert got["messages"] == [tuple(messages[0])]
    assert got["events"] == got["rejects"] == got["trials"] == []


def test_a_batch_of_any_size_takes_few_distinct_statements() -> None:
    texts: set[str] = set()
    for n in range(1, 1400, 7):
        batch = a_batch(1, seed=0)
        many = (batch[0] * n, [], [], [], [], [])
        got = list(statements(250_000, many))
        assert sum(sql.count("(") for sql, _ in got) == n
        texts.update(sql for sql, _ in got)
    assert len(texts) <= 10  # each one prepared once and cached, whatever the batch


async def test_repeats_kept_first_or_replaced_as_one_row_at_a_time_does(tmp_path: Path) -> None:
    """Repeats within a statement, across statements and against rows already stored:
    messages and events keep the first, trials, labels and causes the last."""
    first = a_batch(700, seed=5)
    later = a_batch(700, seed=6)  # the same keys, other values
    later[0][:] = [m._replace(id=f"{i:032x}") for i, m in enumerate(later[0])]
    later[0][1:1] = [later[0][0]._replace(received=-1.0)]  # a repeat in the same statement
    repeats = tuple(a + b for a, b in zip(first, later, strict=True))
    await a_store(tmp_path / "a.db")
    await a_store(tmp_path / "b.db")
    db = await open_db(tmp_path / "a.db")
    try:
        await insert_rows(db, *(rows[:300] for rows in first))  # some stored before
        await insert_rows(db, *repeats)
    finally:
        await db.close()
    one_by_one(tmp_path / "b.db", tuple(rows[:300] for rows in first))
    one_by_one(tmp_path / "b.db", repeats)
    got = stored(tmp_path / "a.db")
    assert got == stored(tmp_path / "b.db")
    assert got["trials"][5] == tuple(later[3][5])  # replaced: the later one
    assert got["events"][5] == tuple(first[1][5])  # kept: the first one


async def test_a_value_sqlite_cannot_bind_stores_nothing_of_its_batch(tmp_path: Path) -> None:
    messages, events, rejects, trials, labels, causes = a_batch(10, seed=7)
    labels[-1] = labels[-1]._replace(trial=2**70)  # OverflowError, not an sqlite3.Error
    await a_store(tmp_path / "a.db")
    db = await open_db(tmp_path / "a.db")
    try:
        with pytest.raises(OverflowError):
            await insert_rows(db, messages, events, rejects, trials, labels, causes)
        await insert_rows(db, [], [], [], [], [], [])  # the next commit commits nothing of it
        with pytest.raises(OverflowError):
            await insert_rows(PublicOnly(db), messages, [], [], [], labels, [])  # type: ignore[arg-type]
        await insert_rows(db, [], [], [], [], [], [])
    finally:
        await db.close()
    assert all(rows == [] for rows in stored(tmp_path / "a.db").values())
