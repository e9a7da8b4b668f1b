"""`errorflow trace RUN_ID [--trial N] [--json]` as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from errorflow.cli.main import main
from errorflow.store.readers import trial_rows
from tests.trace_runs import run_stored


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    db = tmp_path_factory.mktemp("tc") / "t.db"
    result, _ = run_stored("contamination", db, trials=6, propagation="explicit")
    return str(db), result.run_id


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_without_trial_it_shows_the_first_contaminated_one(
    stored: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, run_id = stored
    bad = [t["trial"] for t in trial_rows(Path(db), run_id) if t["outcome"] == "contaminated"]
    wanted, outcome = (bad[0], "contaminated") if bad else (0, "contained")
    code, out, err = cli(capsys, "trace", run_id[:16], "--db", db)
    assert code == 0
    assert f"trial {wanted}: the first trial with outcome {outcome}" in err and "--trial N" in err
    assert out.startswith(f"trial {wanted} of {run_id}")
    assert "Root cause" in out and "Provenance" in out and "Timeline" in out


def test_json_has_all_of_it(stored: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    db, run_id = stored
    code, out, _ = cli(capsys, "trace", run_id, "--trial", "1", "--db", db, "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["trial"] == 1 and doc["run_id"] == run_id
    assert set(doc["genealogy"]) == {
        "propagation", "messages", "invocations", "timeline", "notes", "crashes"
    }  # fmt: skip
    origin = doc["root_cause"]["origins"][0]
    assert (origin["agent"], origin["tool"], origin["step"]) == ("researcher", "search_papers", 1)
    message = doc["genealogy"]["messages"][1]
    for key in ("status", "confidence", "errors", "label", "reason", "handling", "claims"):
        assert key in message
    assert doc["genealogy"]["invocations"][0]["shown"]


def test_a_trial_or_run_that_is_not_there_is_bad_input(
    stored: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, run_id = stored
    code, _, err = cli(capsys, "trace", run_id, "--trial", "99", "--db", db)
    assert code == 2 and "has no trial 99" in err and err.count("\n") <= 3
    code, _, err = cli(capsys, "trace", "nope", "--db", db)
    assert code == 2 and "nope" in err
    code, _, err = cli(capsys, "trace", run_id, "--trial", "-1", "--db", db)
    assert code == 2
