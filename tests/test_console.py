"""Piped output keeps a table's rows whole; COLUMNS still decides when set."""

from __future__ import annotations

import io

import pytest
from rich.table import Table

from errorflow.cli.console import PIPED_WIDTH, _Console


def _printed(console: _Console) -> list[str]:
    table = Table("agent", "loop stops")
    table.add_row("researcher", "permission_denied 3, retries_exhausted 2, circuit_open 7 " * 2)
    console.print(table)
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue().splitlines()


def test_a_table_sent_to_a_pipe_is_not_wrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    console = _Console(file=io.StringIO())
    assert console.width == PIPED_WIDTH
    lines = _printed(console)
    assert len(lines) == 5  # top, header, rule, the one row, bottom
    assert 80 < len(lines[3]) <= PIPED_WIDTH


def test_columns_decides_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    console = _Console(file=io.StringIO())
    assert console.width == 80
    assert len(_printed(console)) > 5  # the row wraps to fit 80 columns
