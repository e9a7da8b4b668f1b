"""`errorflow trace RUN_ID --format html` and the report's links to trace pages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from errorflow.cli.main import main
from errorflow.reports.propagation.trace_page import trace_file_name
from tests.trace_runs import run_stored


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("th") / "t.db"
    result, _ = run_stored("contamination", db, trials=4, propagation="implicit")
    return db, result.run_id


def self_contained(page: str) -> bool:
    """No script and nothing fetched from elsewhere (links between local pages are fine)."""
    return "<script" not in page and not re.search(r'(src|href)="(https?:|//)', page)


def test_the_page_holds_the_graph_and_the_whole_trace(
    stored: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, run_id = stored
    assert main(["trace", run_id, "--trial", "1", "--format", "html", "--db", str(db)]) == 0
    page = capsys.readouterr().out
    assert page.startswith("<!doctype html>") and self_contained(page)
    assert "<svg" in page and "writer → runner: contaminated messages in 1 trials" in page
    assert "Root cause" in page and "Provenance" in page and '<span class="contaminated">' in page


def test_written_to_a_file_with_o(stored: tuple[Path, str], tmp_path: Path) -> None:
    db, run_id = stored
    out = tmp_path / "t.html"
    assert main(["trace", run_id, "--format", "html", "-o", str(out), "--db", str(db)]) == 0
    assert out.read_text().startswith("<!doctype html>")


def test_an_html_report_written_to_a_file_links_its_trace_page(
    stored: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, run_id = stored
    report = tmp_path / "r.html"
    assert main(["report", run_id, "--format", "html", "-o", str(report), "--db", str(db)]) == 0
    page = report.read_text()
    name = trace_file_name(run_id, 0)
    assert f'<a href="{name}">' in page and (tmp_path / name).is_file()
    assert "How contamination travelled" in page and self_contained(page)
    assert main(["report", run_id, "--format", "md", "--db", str(db)]) == 0
    assert f"errorflow trace {run_id} --trial 0 --format html" in capsys.readouterr().out
