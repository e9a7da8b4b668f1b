"""Root causes over a run in `errorflow show` and `errorflow report`: where contamination
starts, where it is stopped, which edges carry it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from errorflow.cli.main import main
from errorflow.reports.root_cause_view import summary_lines
from errorflow.scoring.root_cause_summary import summarize_causes
from errorflow.store import root_causes
from tests.trace_runs import run_stored


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    db = str(tmp_path_factory.mktemp("rcv") / "g.db")
    assert (
        main(["run", "contamination", "--propagation", "both", "--trials", "10", "--db", db]) == 0
    )
    return db, "contamination"


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    return code, capsys.readouterr().out


def _runs(capsys: pytest.CaptureFixture[str], db: str) -> dict[str, str]:
    _, out = cli(capsys, "runs", "--db", db, "--json")
    return {r["label"]: r["run_id"] for r in json.loads(out)}


def test_show_says_where_it_starts_and_which_edges_carry_it(
    group: tuple[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # the lines below as an 80-column terminal shows them
    db, _ = group
    runs = _runs(capsys, db)
    code, out = cli(capsys, "show", runs["implicit"], "--db", db)
    assert code == 0
    assert "Root causes of 10 failed trial(s) (10 contaminated)" in out
    lines = out.splitlines()
    assert any(x.split()[:3] == ["origin", "(tool)", "researcher"] for x in lines)
    assert any(
        "contamination starts" in x and "researcher" in x and x.endswith("10") for x in lines
    )
    assert any("carried by" in x and "researcher → writer" in x for x in lines)
    assert any("dropped" in x and "researcher (swallowed)" in x for x in lines)
    assert max(map(len, lines)) <= 80
    code, out = cli(capsys, "show", runs["explicit"], "--db", db, "--json")
    doc = json.loads(out)
    assert doc["root_causes"]["failed"] == 10
    assert doc["root_causes"]["contained_at"] == {"researcher": 10}


def test_report_has_a_root_cause_table_per_arm(
    group: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = group
    _, out = cli(capsys, "runs", "--db", db, "--json")
    group_id = json.loads(out)[0]["group_id"]
    code, md = cli(capsys, "report", group_id, "--db", db)
    assert code == 0 and "## Root causes" in md
    assert "| implicit | contamination starts | researcher | 10 |" in md
    assert "| explicit | contained first | researcher | 10 |" in md
    code, js = cli(capsys, "report", group_id, "--db", db, "--format", "json")
    arms = {a["label"]: a for a in json.loads(js)["arms"]}
    assert arms["implicit"]["root_causes"]["edges"][0] == {
        "sender": "researcher",
        "recipient": "writer",
        "trials": 10,
    }
    code, html = cli(capsys, "report", group_id, "--db", db, "--format", "html")
    assert "<h2>Root causes</h2>" in html


def test_summary_lines_are_empty_without_failures_and_fit_the_width(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    result, _ = run_stored("support-pipeline", db, trials=12, propagation="implicit")
    summary = summarize_causes(root_causes.load(db, result.run_id).values())
    lines = summary_lines(summary, 60, result.run_id)
    assert lines and max(map(len, lines[:-1])) <= 60  # the last: a command, whole
    assert lines[-1].strip() == f"errorflow trace {result.run_id} --trial N"
    assert summary_lines(summarize_causes([]), 80) == []
    wide = summary_lines(summary, 1000, result.run_id)  # a pipe: counts beside the text
    assert max(map(len, wide)) < 200
