"""The CLI's one error path: every user mistake is exit code 2 with one to three lines in
`validate`'s form (where, what, expected and found, a suggestion), no traceback, and
nothing left in the store; a broker that is down is exit code 1 with one line."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from errorflow.cli.main import main
from errorflow.protocol.signing import new_key
from errorflow.store.opening import open_db
from errorflow.store.runs import create_run
from tests.test_store import BAD_KINDS, as_unprivileged, bad_store, held_lock, shared_directory


async def _stored_runs(db_path: Path, *run_ids: str) -> None:
    db = await open_db(db_path)
    try:
        for run_id in run_ids:
            await create_run(
                db,
                run_id=run_id,
                scenario="contamination",
                scenario_json='{"name": "contamination"}',
                seed=3,
                trials=4,
                propagation="explicit",
                broker="embedded",
            )
    finally:
        await db.close()


def run_rows(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        count: int = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    conn.close()
    return count


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def read_only_db(tmp: Path) -> str:
    """A database path nobody can create: under a 0555 directory, or (root ignores
    permissions) in /proc."""
    if os.geteuid() == 0:
        return "/proc/errorflow-test.db"
    locked = tmp / "locked"
    locked.mkdir()
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH)
    return str(locked / "x.db")


# Each case: the arguments (`{ro}` a read-only path, `{port}` a port in use, `{key}` a
# key file others can read), and what stderr must say; `--db` the test's store is added.
AGENT = ["agent", "contamination", "--name", "writer", "--broker", "mqtt://x:1", "--run", "r"]
CASES: dict[str, tuple[list[str], list[str]]] = {
    "strategy typo": (
        ["run", "contamination", "--set", "agents.researcher.policy.strategy=clasify"],
        ["--set agents.researcher.policy.strategy=clasify", "did you mean 'classify'?"],
    ),
    "key typo": (
        ["run", "contamination", "--set", "agents.researcher.polcy.x=1"],
        ["agents.researcher.polcy", "did you mean 'policy'?"],
    ),
    "too many trials": (
        ["run", "contamination", "--trials", "200000"],
        ["--trials 200000", "from 1 to 100000, found 200000"],
    ),
    "no trials": (["run", "contamination", "--trials", "0"], ["--trials", "found 0"]),
    "read-only db": (
        ["run", "contamination", "--db", "{ro}"],
        ["--db", "cannot create a file there", "expected a writable location"],
    ),
    "run id taken": (
        ["run", "contamination", "--run-id", "taken-1"],
        ["--run-id taken-1", "already", "expected a new id"],
    ),
    "port in use": (
        ["serve", "contamination", "--port", "{port}"],
        ["--port {port}", "already in use", "expected a free port"],
    ),
    "ambiguous show": (["show", "abc"], ["ambiguous", "abc-1", "abc-2"]),
    "ambiguous report": (["report", "abc"], ["ambiguous", "abc-1", "abc-2"]),
    "ambiguous replay": (["tui", "--replay", "abc"], ["ambiguous", "abc-1", "abc-2"]),
    "ambiguous resume": (["run", "--resume", "abc"], ["--resume abc", "ambiguous"]),
    "unknown id": (["show", "nope"], ["nope", "no run or group", "errorflow runs"]),
    "unknown report": (["report", "nope"], ["nope", "no run or group"]),
    "bad broker scheme": (
        ["run", "contamination", "--broker", "http://x"],
        ["--broker http://x", "mqtt://"],
    ),
    "bad broker port": (
        ["run", "contamination", "--broker", "mqtt://localhost:port"],
        ["--broker mqtt://localhost:port", "port"],
    ),
    "unknown agent": (
        ["agent", "contamination", "--name", "nobody", "--broker", "mqtt://x:1", "--run", "r"],
        ["--name nobody", "researcher, writer"],
    ),
    "agent without key": (
        AGENT,
        ["--key-file", "ERRORFLOW_RUN_KEY"],
    ),
    "external agents without key": (
        ["run", "contamination", "--external-agents", "--run-id", "ext-1"],
        ["--external-agents", "--key-file"],
    ),
    "bad run key": (["run", "contamination", "--trials", "1"], ["ERRORFLOW_RUN_KEY", "64"]),
    "open key file": (
        [*AGENT, "--key-file", "{key}"],
        ["--key-file", "readable by others", "chmod 600"],
    ),
    "unknown option": (
        ["run", "contamination", "--trails", "3"],
        ["--trails", "did you mean '--trials'?"],
    ),
    "command typo": (["rnu", "contamination"], ["'rnu'", "did you mean 'run'?"]),
    "db that is no store": (["runs", "--db", "{junk}"], ["--db", "not an SQLite database"]),
    "db without tables": (["show", "x", "--db", "{empty}"], ["--db", "no such table"]),
}
# Commands without a --db option
DB_FREE = {"port in use", "unknown agent", "agent without key", "open key file"}


@pytest.mark.parametrize("case", list(CASES))
def test_user_mistakes_exit_2_in_at_most_three_lines(
    case: str,
    tmp_path: Path,
    busy_port: int,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args, expected = CASES[case]
    db = tmp_path / "s.db"
    asyncio.run(_stored_runs(db, "abc-1", "abc-2", "taken-1"))
    monkeypatch.delenv("ERRORFLOW_RUN_KEY", raising=False)
    if case == "bad run key":
        monkeypatch.setenv("ERRORFLOW_RUN_KEY", "abcd")

    key_file = tmp_path / "open.key"
    key_file.write_text(new_key().hex())
    key_file.chmod(0o644)

    junk, empty = tmp_path / "junk.db", tmp_path / "empty.db"
    junk.write_bytes(b"\x00not sqlite\xff" * 64)
    sqlite3.connect(empty).close()  # a database file with no tables

    def fill(text: str) -> str:
        return text.format(
            ro=read_only_db(tmp_path), port=busy_port, key=key_file, junk=junk, empty=empty
        )

    argv = [fill(a) for a in args]
    if "--db" not in argv and case not in DB_FREE:
        argv += ["--db", str(db)]
    code = main(argv)
    err = capfd.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert 1 <= len(lines) <= 3, err
    assert "Traceback" not in err and "pydantic.dev" not in err
    assert lines[0].startswith("error: ")
    for text in expected:
        assert fill(text) in err
    assert run_rows(db) == 3  # nothing new in the store


def test_a_run_whose_broker_is_down_leaves_no_run(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = tmp_path / "down.db"
    code = main(["run", "contamination", "--broker", f"mqtt://127.0.0.1:{port}", "--db", str(db)])
    err = capfd.readouterr().err
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"127.0.0.1:{port}" in err
    assert run_rows(db) == 0  # no `interrupted` run to clean up


# -- a --db that cannot hold a store: one line, exit 2, for every command that takes one --

#: Every command that takes --db, as the matrix runs it (the store's runs are `abc-1`...).
WRITERS = {
    "run": ["run", "contamination", "--trials", "1", "-q"],
    "run both": ["run", "contamination", "--trials", "1", "-q", "--propagation", "both"],
    "run baseline": ["run", "contamination", "--trials", "1", "-q", "--baseline"],
    "sweep": ["sweep", "contamination", "--vary", "seed=1,2", "--trials", "1", "-q"],
    "tui live": ["tui", "contamination", "--trials", "1"],
    "serve": ["serve", "contamination", "--port", "{port}"],
}
READERS = {
    "runs": ["runs"],
    "show": ["show", "abc-1"],
    "report": ["report", "abc-1"],
    "tui replay": ["tui", "--replay", "abc-1", "--speed", "0"],
    "tui attach": ["tui", "--attach", "abc-1", "--broker", "mqtt://127.0.0.1:1"],
    "resume": ["run", "--resume", "abc-1"],
}


def _one_error_line(err: str, db: Path) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"error: --db {db}: "), err
    return lines[0]


@pytest.mark.parametrize("command", [*WRITERS, *READERS])
@pytest.mark.parametrize("kind", BAD_KINDS)
def test_a_db_that_is_no_store_is_one_line_for_every_command(
    kind: str,
    command: str,
    tmp_path: Path,
    busy_port: int,
    capfd: pytest.CaptureFixture[str],
) -> None:
    db = bad_store(tmp_path, kind)
    before = db.read_bytes() if db.is_file() else None
    args = [a.format(port=busy_port) for a in {**WRITERS, **READERS}[command]]
    code = main([*args, "--db", str(db)])
    line = _one_error_line(capfd.readouterr().err, db)
    assert code == 2
    expected = {"directory": "is a directory", "fifo": "not a regular file"}
    assert expected.get(kind, "SQLite database") in line
    if before is not None:
        assert db.read_bytes() == before  # never written over


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two real stores with an interrupted run `abc-1`: WAL (as errorflow writes them) and
    a rollback journal (where a lock stops readers too)."""
    made = {}
    for mode in ("wal", "journal"):
        db = tmp_path_factory.mktemp(mode) / "s.db"
        assert main(["run", "contamination", "--trials", "1", "-q", "--run-id", "abc-1",
                     "--db", str(db)]) == 0  # fmt: skip
        conn = sqlite3.connect(db, isolation_level=None)  # a journal mode changes outside one
        conn.execute("UPDATE runs SET status = 'interrupted'")
        if mode == "journal":
            assert conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
        conn.close()
        made[mode] = db
    return made


@pytest.mark.parametrize("command", [*WRITERS, *READERS])
def test_a_store_another_process_locks_is_one_line_for_every_command(
    command: str,
    stores: dict[str, Path],
    busy_port: int,
    capfd: pytest.CaptureFixture[str],
) -> None:
    capfd.readouterr()
    db = stores["journal"]
    args = [a.format(port=busy_port) for a in {**WRITERS, **READERS}[command]]
    with held_lock(db):
        code = main([*args, "--db", str(db)])
    line = _one_error_line(capfd.readouterr().err, db)
    assert code == 2 and "locked by another process" in line and "another --db" in line


@pytest.mark.parametrize("command", [*WRITERS, "resume"])
def test_a_wal_store_another_process_locks_refuses_writers(
    command: str,
    stores: dict[str, Path],
    busy_port: int,
    capfd: pytest.CaptureFixture[str],
) -> None:
    capfd.readouterr()
    db = stores["wal"]
    args = [a.format(port=busy_port) for a in {**WRITERS, **READERS}[command]]
    with held_lock(db):
        code = main([*args, "--db", str(db)])
        assert main(["show", "abc-1", "--db", str(db)]) == 0  # readers are not held up
    line = _one_error_line(capfd.readouterr().err, db)
    assert code == 2 and "locked by another process" in line


BAD_RUN = ["-m", "errorflow", "run", "contamination", "--trials", "1", "-q", "--db"]


@pytest.mark.parametrize("kind", [*BAD_KINDS, "locked"])
@pytest.mark.parametrize("argv", [BAD_RUN, ["-m", "errorflow", "runs", "--db"]])
def test_a_bad_db_ends_the_process_with_one_line(
    kind: str, argv: list[str], tmp_path: Path, stores: dict[str, Path]
) -> None:
    """As a user sees it: the process ends (nothing keeps it alive), one line, exit 2."""
    db = stores["journal"] if kind == "locked" else bad_store(tmp_path, kind)
    lock = held_lock(db) if kind == "locked" else contextlib.nullcontext()
    with lock:
        proc = subprocess.run(
            [sys.executable, *argv, str(db)], capture_output=True, text=True, timeout=60
        )
    assert proc.returncode == 2
    _one_error_line(proc.stderr, db)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    with shared_directory() as base:
        yield base


def test_read_only_stores_as_a_user_without_write_access(shared_dir: Path) -> None:
    ro = shared_dir / "ro"
    ro.mkdir()
    db = ro / "s.db"
    assert main(["run", "contamination", "--trials", "1", "-q", "--db", str(db)]) == 0
    db.chmod(0o444)
    ro.chmod(0o555)
    runs = subprocess.run(
        as_unprivileged([sys.executable, "-m", "errorflow", "runs", "--db", str(db)]),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert runs.returncode == 0 and "contamination" in runs.stdout, runs.stderr  # readable
    for path, said in ((db, "read-only"), (ro, "is a directory"), (ro / "new.db", "cannot create")):
        proc = subprocess.run(
            as_unprivileged([sys.executable, *BAD_RUN, str(path)]),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 2
        assert said in _one_error_line(proc.stderr, path)


# -- bad input is at most three short lines, whatever it is -------------------------------


def test_a_long_or_many_lined_text_is_bounded() -> None:
    from errorflow.cli.errors import MAX_LINE_CHARS, bounded
    from errorflow.core.errors import MAX_LINES

    many = bounded("\n".join(f"problem {i}" for i in range(5000)))
    assert many.splitlines() == ["problem 0", "problem 1", "(and 4,998 more problems)"]
    (line,) = bounded("--set name=" + "n" * 999_000 + ": expected at most 64").splitlines()
    assert len(line) <= MAX_LINE_CHARS + 40 and line.endswith(": expected at most 64")
    assert "characters cut" in line and MAX_LINES == 3


def test_an_option_quoted_in_an_error_is_shortened_and_kept_on_one_line() -> None:
    from errorflow.cli.errors import UsageError

    text = UsageError("no such run", where="--resume " + "x" * 100_000).text
    assert text.startswith("--resume xxx") and "(100,009 characters)" in text and len(text) < 200
    assert UsageError("bad", where="--host a\nb").text == "--host a\\nb: bad"


def test_a_scenario_with_many_problems_is_three_lines(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: " + "n" * 999_000 + "\n")  # too long, and no agents nor task
    assert main(["validate", str(path)]) == 2
    lines = capfd.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and all(len(line) < 400 for line in lines), lines
    assert lines[0].startswith("error: invalid scenario (3 problems; the first two below")
    assert f"errorflow validate --all {path}" in lines[0]
    assert "expected at most 64 characters, found 999000: 'nnnn" in lines[1]
    assert main(["validate", "--all", str(path)]) == 2
    assert len(capfd.readouterr().err.strip().splitlines()) == 4  # every problem


@pytest.mark.parametrize(
    ("error", "code", "said"),
    [
        (OSError(36, "File name too long", "x" * 5000), 2, "(5,000 characters): File name too"),
        (IsADirectoryError(21, "Is a directory", "/tmp"), 2, "/tmp: Is a directory"),
        (OSError(28, "No space left on device"), 1, "No space left on device"),
    ],
)
def test_an_os_error_is_one_line_and_bad_input_when_it_is_about_a_path(
    error: OSError, code: int, said: str
) -> None:
    from errorflow.cli.errors import explain

    known = explain(error)
    assert known is not None and known[0] == code and said in known[1]
    assert "\n" not in known[1] and len(known[1]) < 200
