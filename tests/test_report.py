"""`errorflow sweep`, `run --propagation both` and `errorflow report`, as a user runs them."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from errorflow.cli.main import main
from errorflow.core.costs import Costs
from errorflow.reports.report import (
    ReportArm,
    ReportJson,
    build,
    to_csv,
    to_html,
    to_markdown,
)
from errorflow.scoring.score import Outcome, TrialScore
from errorflow.scoring.summary import summarize
from errorflow.store.readers import get_run


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


def report_of(scores: list[TrialScore], label: str = "explicit") -> ReportJson:
    """A report of one finished run, its arm built from `scores` as a stored run's is."""
    summary = summarize(scores)
    arm: ReportArm = {
        "label": label,
        "run_id": "r-1",
        "scenario": "contamination",
        "seed": 3,
        "trials": len(scores),
        "propagation": "explicit",
        "status": "finished",
        "outcomes": summary["outcomes"],
        "metrics": summary["metrics"],
        "amplification": None,
        "rejects": {},
        "trial_outcomes": [s.outcome.value for s in scores],
    }
    return {"id": "r-1", "group_id": None, "arms": [arm]}


def test_csv_columns_and_markdown_cells_of_a_hand_built_report() -> None:
    costs = Costs(backend_calls=2, model_calls=2, input_tokens=400, output_tokens=51)
    data = report_of([TrialScore(0, Outcome.SUCCESS, 0, costs=costs)])
    header, row = to_csv(data).splitlines()
    outcome_columns = [
        f"{o}{suffix}"
        for o in ("success", "contained", "contaminated", "bus_fault")
        for suffix in ("", "_rate", "_ci_low", "_ci_high")
    ]
    assert header.split(",") == [
        "label",
        "run_id",
        "trials",
        "propagation",
        "status",
        *outcome_columns,
        "backend_calls",
        "model_calls",
        "input_tokens",
        "output_tokens",
        "retries",
        "sim_seconds",
        "backend_amplification",
        "model_amplification",
        "mean_depth",
    ]
    assert row.startswith("explicit,r-1,1,explicit,finished,1,1.0,0.2065,1.0,0,0.0,0.0,")
    assert row.endswith(",2.0,2.0,400.0,51.0,0.0,0.0,,,0.0")
    md = to_markdown(data)
    assert "| explicit | 1 (100%, CI 21%–100%) | 0 (0%, CI 0%–79%) |" in md
    assert "| explicit | 2.00 | 2.00 | 451 | 0.00 | 0.00 | – | – |" in md
    assert "Paired difference" not in md


def test_markdown_and_html_show_outside_strings_literally() -> None:
    """A label, a scenario and an id can hold anything a `--vary` value or the store
    held: in Markdown no cell is split, no HTML or code span starts; nothing raw in HTML."""
    summary = summarize([TrialScore(0, Outcome.SUCCESS, 0)])
    hostile = "a|b `c` <script>alert(1)</script> **x** [l](javascript:x) \x1b]0;T\x07\u202e\nz"
    arm: ReportArm = {
        "label": hostile,
        "run_id": "r-1",
        "scenario": "<b>s</b>|\x1b[?1049l",
        "seed": 3,
        "trials": 1,
        "propagation": "explicit",
        "status": "finished",
        "outcomes": summary["outcomes"],
        "metrics": summary["metrics"],
        "amplification": None,
        "rejects": {},
        "trial_outcomes": ["success"],
    }
    data: ReportJson = {"id": "<id>|\x07", "group_id": None, "arms": [arm]}
    md = to_markdown(data)
    label = (
        "a\\|b \\`c\\` &lt;script&gt;alert(1)&lt;/script&gt; \\*\\*x\\*\\* "
        "\\[l\\](javascript:x) \\\\x1b\\]0;T\\\\x07\\\\u202e\\\\nz"
    )
    assert f"| {label} | 1 (100%, CI 21%–100%) |" in md
    assert "# errorflow report: &lt;id&gt;\\|\\\\x07" in md
    assert "Scenario **&lt;b&gt;s&lt;/b&gt;\\|\\\\x1b\\[?1049l**, seed 3" in md
    for row in (line for line in md.splitlines() if line.startswith("| a")):
        assert row.count(" | ") == row.replace("\\|", "").count(" | ")  # no cell split
    for raw in ("<script>", "<b>", "<id>", "\x1b", "\x07", "\u202e"):
        assert raw not in md
    page = to_html(data)
    assert "<script>" not in page and "<b>s" not in page and "\x1b" not in page
    assert "<td>a|b `c` &lt;script&gt;alert(1)&lt;/script&gt; **x**" in page
    assert "\\x1b]0;T\\x07\\u202e\\nz</td>" in page  # one cell, controls made visible


def test_timeline_of_the_outage_run_against_its_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`outage` (a run-scoped breaker): the timeline's calls add up to the services'
    ledger, the outage's buckets are marked, the breaker is open during it and closed
    after, and the HTML report draws it."""
    db = str(tmp_path / "o.db")
    code, out, _ = cli(capsys, "run", "outage", "--db", db, "--json", "--baseline", "-q")
    assert code == 0
    run = get_run(Path(db), json.loads(out)["run_id"])
    assert run is not None and run["group_id"] is not None  # the run and its baseline
    group = run["group_id"]
    code, js, _ = cli(capsys, "report", group, "--db", db, "--format", "json")
    [arm] = json.loads(js)["arms"]
    tl, ledger = arm["timeline"], arm["services"]["search_api"]
    s = tl["services"]["search_api"]
    assert tl["bucket_s"] == 5.0 and tl["buckets"] == len(s["calls"]) == 36
    assert sum(s["calls"]) == ledger["calls"] and sum(s["answered"]) == ledger["answered"]
    assert sum(s["failed"]) == ledger["refused"]["down"] and sum(s["rate_limited"]) == 0
    assert sum(s["shed"]) == arm["metrics"]["policy"]["researcher"]["refused_open"]
    assert s["outages"] == [[60.0, 120.0]]
    assert [i for i, d in enumerate(s["down"]) if d] == list(range(12, 24))
    assert sum(s["calls"][12:24]) == ledger["outages"][0]["calls_during"]
    base = s["baseline_calls"]
    assert sum(base) > sum(s["calls"])  # the breaker shed more than the retries added
    assert sum(base[12:24]) > 4 * sum(s["calls"][16:24])  # ... most of all while open
    [breaker] = tl["breakers"]
    assert (breaker["agent"], breaker["scope"]) == ("researcher", "run")
    states = [(i["state"], i["start_s"], i["end_s"]) for i in breaker["intervals"]]
    assert states[0][0] == "closed" and states[-1][0] == "closed"
    assert states[-1][2] == tl["span_s"] and states[-1][1] > 120.0  # closed after the outage
    opened = [(a, b) for st, a, b in states if st == "open"]
    assert opened and all(60.0 <= a < 120.0 for a, _ in opened)

    page_file = tmp_path / "o.html"
    cli(capsys, "report", group, "--db", db, "--format", "html", "-o", str(page_file))
    page = page_file.read_text()
    assert "<script" not in page and "No timeline" not in page
    assert 'aria-label="timeline of explicit"' in page and ">search_api</text>" in page
    assert "down 60–120 s" in page and "breaker open" in page and "baseline" in page
    code, md, _ = cli(capsys, "report", group, "--db", db)
    assert "## Timeline" in md
    assert "| explicit | search_api | 60–75 |" in md and "researcher/search_papers: open" in md


def test_a_run_without_services_or_breaker_moves_has_no_timeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "c.db")
    code, out, _ = cli(capsys, "run", "contamination", "--trials", "4", "--db", db, "--json")
    run_id = json.loads(out)["run_id"]
    code, js, _ = cli(capsys, "report", run_id, "--db", db, "--format", "json")
    assert "timeline" not in json.loads(js)["arms"][0]
    code, md, _ = cli(capsys, "report", run_id, "--db", db)
    assert code == 0 and "Timeline" not in md
    page_file = tmp_path / "c.html"
    cli(capsys, "report", run_id, "--db", db, "--format", "html", "-o", str(page_file))
    page = page_file.read_text()
    assert page.count("No timeline:") == 1 and "timeline of" not in page
    # outcome bars, rates with intervals, contamination by agent, the propagation graph;
    # no timeline chart
    assert page.count("<svg") == 4


def test_timeline_of_a_retry_storm_counts_timeouts_as_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`retry-storm` (blind retries on a service that slows under load): the calls the
    service took add up to its ledger, the abandoned (timed out) ones among the failures."""
    db = str(tmp_path / "r.db")
    code, out, _ = cli(capsys, "run", "retry-storm", "--trials", "60", "--db", db, "--json")
    run_id = json.loads(out)["run_id"]
    code, js, _ = cli(capsys, "report", run_id, "--db", db, "--format", "json")
    assert code == 0
    [arm] = json.loads(js)["arms"]
    s, ledger = arm["timeline"]["services"]["search_api"], arm["services"]["search_api"]
    assert sum(s["calls"]) == ledger["calls"] > 60
    degraded = ledger["refused"].get("degraded", 0)
    assert sum(s["failed"]) >= degraded and sum(s["answered"]) <= ledger["answered"]
    assert sum(s["answered"]) + sum(s["failed"]) == ledger["answered"] + degraded
    assert not any(s["down"]) and "baseline_calls" not in s  # no outage, no baseline run


def test_an_arm_that_measured_nothing_has_no_rates_in_any_format() -> None:
    """Every trial an infra fault: no 0 % with an interval of everything, in the CSV,
    the Markdown or the HTML chart."""
    data = report_of([TrialScore(i, Outcome.INFRA_FAULT, 0) for i in range(3)], "down")
    header, row = to_csv(data).splitlines()
    cells = dict(zip(header.split(","), row.split(","), strict=True))
    assert cells["success"] == "0" and cells["infra_fault"] == "3"
    assert cells["success_rate"] == cells["success_ci_low"] == cells["success_ci_high"] == ""
    md = to_markdown(data)
    assert "| down | 0 (n/a: no trial measured) |" in md and "0%" not in md
    page = to_html(data)
    assert "outcome rates with 95" in page and "down: success" not in page


@pytest.mark.parametrize(
    ("sweep", "cells"),
    [
        (["strategy-matrix"], 9),  # tool faults
        (["lineage-guard", "--vary", "agents.b.faults.0.p=0.2,0.5"], 2),  # an agent's
    ],
)
def test_every_sweep_cell_is_measured_against_the_baseline_it_shared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sweep: list[str], cells: int
) -> None:
    """A sweep runs one baseline for the cells whose fault-free scenario is the same;
    the report finds it for each of them, as the sweep printed."""
    db = str(tmp_path / "s.db")
    code, out, _ = cli(capsys, "sweep", *sweep, "--set", "trials=4", "--db", db, "--json")
    assert code == 0
    printed = json.loads(out)
    data = build(Path(db), printed["group_id"])
    assert len(data["arms"]) == cells
    for arm in data["arms"]:
        assert arm["amplification"] is not None, arm["label"]
        assert arm["amplification"] == printed["cells"][arm["label"]]["amplification"]


def test_a_report_into_a_missing_folder_names_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "m.db")
    assert cli(capsys, "run", "contamination", "--trials", "2", "--db", db, "--run-id", "m-1",
               "-q")[0] == 0  # fmt: skip
    target = tmp_path / "rep" / "x.html"
    code, _, err = cli(capsys, "report", "m-1", "--db", db, "-o", str(target), "--format", "html")
    assert code == 2 and f"-o {target}" in err and "is not a directory" in err
    assert not (tmp_path / "rep").exists()
