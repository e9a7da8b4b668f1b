"""$ERRORFLOW_DB: the store every command uses without --db."""

from __future__ import annotations

from pathlib import Path

import pytest

from errorflow.cli.errors import db_option
from errorflow.cli.main import main
from errorflow.store.opening import DB_ENV
from errorflow.store.readers import list_runs


def test_a_run_and_the_commands_after_it_use_the_store_the_environment_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "nb.db"
    monkeypatch.setenv(DB_ENV, str(db))
    monkeypatch.chdir(tmp_path)
    assert main(["run", "contamination", "--trials", "2", "-q", "--run-id", "env-run"]) == 0
    assert [r["run_id"] for r in list_runs(db)] == ["env-run"]
    assert not (tmp_path / "errorflow.db").exists()
    capsys.readouterr()
    assert main(["runs"]) == 0
    assert "env-run" in capsys.readouterr().out
    assert main(["show", "env-run"]) == 0
    # The commands errorflow prints need no --db: the environment gives it.
    assert db_option(str(db)) == ""
    assert db_option(str(tmp_path / "other.db")).startswith(" --db ")


def test_a_store_named_by_the_environment_is_checked_like_db(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(DB_ENV, str(tmp_path))  # a directory
    assert main(["runs"]) == 2
    err = capsys.readouterr().err
    assert "--db" in err and "directory" in err and "Traceback" not in err


def test_db_on_the_command_line_wins_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(DB_ENV, str(tmp_path / "env.db"))
    explicit = tmp_path / "explicit.db"
    assert main(["run", "contamination", "--trials", "1", "-q", "--db", str(explicit)]) == 0
    assert len(list_runs(explicit)) == 1
    assert not (tmp_path / "env.db").exists()
