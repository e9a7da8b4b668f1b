"""`errorflow export RUN_ID --format who-when`: failed trials in the Who&When layout, with
ground-truth labels that agree with `errorflow trace`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from errorflow.cli.main import main
from errorflow.store.trial_store import load_trace
from tests.trace_runs import run_stored

#: The fields of a record of the dataset's Algorithm-Generated half, and their types.
LAYOUT: dict[str, type | tuple[type, ...]] = {
    "is_correct": bool,
    "question": str,
    "question_ID": str,
    "ground_truth": str,
    "history": list,
    "mistake_agent": str,
    "mistake_step": int,
    "mistake_reason": str,
    "system_prompt": dict,
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    db = tmp_path_factory.mktemp("ww") / "w.db"
    ids = [
        run_stored("contamination", db, trials=8, propagation="implicit")[0].run_id,
        run_stored("support-pipeline", db, trials=16, propagation="explicit")[0].run_id,
    ]
    return db, ids


def export(db: Path, run_id: str, out: Path) -> list[tuple[int, dict[str, Any]]]:
    assert main(["export", run_id, "--format", "who-when", "-o", str(out), "--db", str(db)]) == 0
    return sorted((int(p.stem), json.loads(p.read_text())) for p in out.glob("*.json"))


def test_each_failed_trial_parses_as_the_layout(
    runs: tuple[Path, list[str]], tmp_path: Path
) -> None:
    db, ids = runs
    for run_id in ids:
        records = export(db, run_id, tmp_path / run_id)
        assert records
        for trial, rec in records:
            for field, kind in LAYOUT.items():
                assert isinstance(rec[field], kind), (field, rec[field])
            assert rec["is_correct"] is False
            assert rec["question_ID"] == f"{run_id}-t{trial}"
            assert all(set(step) == {"role", "name", "content"} for step in rec["history"])
            assert rec["history"][0]["name"] == "runner"
            assert 0 <= rec["mistake_step"] < len(rec["history"])
            names = {step["name"] for step in rec["history"]}
            assert rec["mistake_agent"] in names and rec["mistake_agent"] in rec["system_prompt"]
            assert json.loads(rec["ground_truth"])  # the needs' true values


def test_the_ground_truth_agrees_with_trace(runs: tuple[Path, list[str]], tmp_path: Path) -> None:
    db, ids = runs
    for run_id in ids:
        for trial, rec in export(db, run_id, tmp_path / run_id):
            trace = load_trace(db, run_id, trial)
            assert trace is not None and trace.root_cause is not None
            origin = trace.root_cause.primary
            assert origin is not None
            assert rec["mistake_agent"] == origin.agent
            step = rec["history"][rec["mistake_step"]]
            assert step["name"] == origin.agent
            if origin.kind == "tool":  # the step is the turn whose call failed
                assert f"[{origin.call_id}]" in step["content"] and origin.tool in step["content"]
                assert origin.code in step["content"]
            facts = rec["errorflow"]
            assert facts["outcome"] == trace.outcome and facts["depth"] == trace.depth
            labels = {m.id: (m.label, m.reason) for m in trace.genealogy.messages if m.label}
            exported = {
                s["message_id"]: (s["label"], s["label_reason"])
                for s in facts["steps"]
                if s["message_id"]
            }
            assert exported == labels


def test_the_contamination_story_attributes_the_researcher(
    runs: tuple[Path, list[str]], tmp_path: Path
) -> None:
    db, ids = runs
    _, rec = export(db, ids[0], tmp_path / "c")[0]
    assert rec["mistake_agent"] == "researcher" and rec["mistake_step"] == 1
    assert "search_papers" in rec["history"][1]["content"]
    assert "swallowed" in rec["mistake_reason"] and "depth 2" in rec["mistake_reason"]
    assert json.loads(rec["ground_truth"]) == {
        "papers": ["bahdanau2015", "shaw2018", "vaswani2017"]
    }


def test_without_o_it_prints_json_lines_and_a_group_gets_a_folder_per_run(
    runs: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, ids = runs
    capsys.readouterr()
    assert main(["export", ids[0], "--format", "who-when", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 8 and all(json.loads(line)["mistake_agent"] for line in lines)
    group_db = tmp_path / "g.db"
    assert (
        main(
            [
                "run",
                "contamination",
                "--propagation",
                "both",
                "--trials",
                "3",
                "--db",
                str(group_db),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["runs", "--db", str(group_db), "--json"]) == 0
    group = json.loads(capsys.readouterr().out)[0]["group_id"]
    out = tmp_path / "both"
    assert (
        main(["export", group, "--format", "who-when", "-o", str(out), "--db", str(group_db)]) == 0
    )
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{group}-{arm}" for arm in ("explicit", "implicit")
    )
