"""`errorflow sweep`, `run --propagation both` and `errorflow report`, as a user runs them."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from errorflow.cli.main import main


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_both_arms_json_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "b.db")
    code, out, _ = cli(
        capsys,
        "run",
        "contamination",
        "--propagation",
        "both",
        "--trials",
        "20",
        "--db",
        db,
        "--json",
        "--baseline",
    )
    assert code == 0
    data = json.loads(out)
    assert set(data["arms"]) == {"explicit", "implicit"}
    assert set(data["arms"]["explicit"]) == set(data["arms"]["implicit"])
    assert data["arms"]["implicit"]["outcomes"]["contaminated"] == 20
    assert data["arms"]["explicit"]["outcomes"]["contaminated"] < 10
    assert data["paired"]["contaminated"]["diff"] < 0
    assert data["arms"]["explicit"]["amplification"]["backend_calls"] == 1.0
    group = data["group_id"]

    code, md, _ = cli(capsys, "report", group, "--db", db)
    assert code == 0
    assert "| explicit |" in md and "| implicit |" in md and "Paired difference" in md
    code, js, _ = cli(capsys, "report", group, "--db", db, "--format", "json")
    report = json.loads(js)
    assert [a["label"] for a in report["arms"]] == ["explicit", "implicit"]
    assert report["paired"]["contaminated"]["only_b"] == data["paired"]["contaminated"]["only_b"]
    code, text, _ = cli(capsys, "report", group, "--db", db, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["label"] for r in rows] == ["explicit", "implicit"]
    assert rows[1]["contaminated"] == "20"
    out_html = tmp_path / "r.html"
    code, _, _ = cli(capsys, "report", group, "--db", db, "--format", "html", "-o", str(out_html))
    page = out_html.read_text()
    assert page.startswith("<!doctype html>") and "<svg" in page and "<table>" in page
    code, _, err = cli(capsys, "report", "nope", "--db", db)
    assert code == 2 and "no run or group" in err


def test_sweep_matrix_prints_published_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "sweep", "amplification", "--db", str(tmp_path / "s.db"))
    assert code == 0
    assert "published" in out and "1.5/1.0" in out and "blind-retry" in out


def test_sweep_vary_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(
        capsys,
        "sweep",
        "contamination",
        "--vary",
        "propagation=explicit,implicit",
        "--vary",
        "agents.writer.model.profile=small-local,frontier",
        "--trials",
        "10",
        "--no-baseline",
        "--json",
        "--db",
        str(tmp_path / "v.db"),
    )
    assert code == 0
    data = json.loads(out)
    assert [a["name"] for a in data["axes"]] == ["propagation", "agents.writer.model.profile"]
    assert set(data["cells"]) == {
        "explicit/small-local",
        "explicit/frontier",
        "implicit/small-local",
        "implicit/frontier",
    }
    assert data["cells"]["implicit/frontier"]["outcomes"]["contaminated"] == 10


def test_sweep_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "sweep", "contamination", "--db", str(tmp_path / "e.db"))
    assert code == 2 and "no sweep" in err
    code, _, err = cli(
        capsys, "sweep", "contamination", "--vary", "trials", "--db", str(tmp_path / "e.db")
    )
    assert code == 2 and "PATH=V1,V2" in err
    code, _, err = cli(
        capsys, "sweep", "contamination", "--vary", "trials=0,1", "--db", str(tmp_path / "e.db")
    )
    assert code == 2 and "invalid scenario" in err


def test_report_of_an_interrupted_run_uses_its_stored_trials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    db = tmp_path / "k.db"
    code, out, _ = cli(
        capsys,
        "run",
        "contamination",
        "--trials",
        "6",
        "--db",
        str(db),
        "--json",
        "--propagation",
        "implicit",
    )
    run_id = json.loads(out)["run_id"]
    with sqlite3.connect(db) as conn:  # as a SIGKILL leaves it: no summary yet
        conn.execute("UPDATE runs SET summary_json = NULL, status = 'running', pid = NULL")
    code, text, _ = cli(capsys, "report", run_id, "--db", str(db), "--format", "json")
    assert code == 0
    arm = json.loads(text)["arms"][0]
    assert arm["outcomes"]["contaminated"] == 6
    assert arm["metrics"]["per_trial"]["backend_calls"] == 1.0
