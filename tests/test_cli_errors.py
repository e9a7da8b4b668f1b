"""The CLI's one error path: every user mistake is exit code 2 with one to three lines in
`validate`'s form (where, what, expected and found, a suggestion), no traceback, and
nothing left in the store; a broker that is down is exit code 1 with one line."""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from errorflow.bus.signing import new_key
from errorflow.cli.main import main
from errorflow.runtime.store import create_run, open_db


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
        ["--db", "cannot write a database there", "expected a writable location"],
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
    "db that is no store": (["runs", "--db", "{junk}"], ["--db", "not an errorflow store"]),
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
