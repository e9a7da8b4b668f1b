"""The exports built from trial traces, through `errorflow export`: what each needs, and
what it says when it cannot."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from errorflow.cli.main import main
from errorflow.cli.trace_exports import OTEL_MISSING, scenario_facts
from errorflow.store.readers import get_run
from tests.trace_runs import run_stored


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    db = tmp_path_factory.mktemp("te") / "t.db"
    result, _ = run_stored("contamination", db, trials=3, propagation="implicit")
    return str(db), result.run_id


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    return code, capsys.readouterr().err


def test_export_needs_a_format_or_a_receiver(
    stored: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, run_id = stored
    code, err = cli(capsys, "export", run_id, "--db", db)
    assert code == 2 and "--format FORMAT, or --otlp URL" in err


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--otlp", "http://127.0.0.1:1", "--format", "who-when"], "give one"),
        (["--format", "who-when", "--span-time", "sim"], "only --otlp and --format otlp-json"),
        (["--format", "otlp-json", "--traffic", "."], "only --format cassette"),
    ],
)
def test_export_refuses_an_option_it_would_not_use(
    stored: tuple[str, str], capsys: pytest.CaptureFixture[str], options: list[str], said: str
) -> None:
    db, run_id = stored
    code, err = cli(capsys, "export", run_id, *options, "--db", db)
    assert code == 2 and said in err


def test_run_refuses_span_times_without_a_receiver(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = cli(capsys, "run", "contamination", "--trials", "1", "--span-time", "sim")
    assert code == 2 and "--otlp" in err


def test_who_when_writes_a_directory_not_over_a_file(
    stored: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, run_id = stored
    taken = tmp_path / "file"
    taken.write_text("mine")
    code, err = cli(capsys, "export", run_id, "--format", "who-when", "-o", str(taken), "--db", db)
    assert code == 2 and "is a file" in err and taken.read_text() == "mine"
    code, err = cli(
        capsys, "export", run_id, "--format", "who-when", "-o", str(tmp_path / "d"), "--db", db
    )
    assert code == 0 and "wrote 3 failed trial(s)" in err
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["0.json", "1.json", "2.json"]


def test_without_the_otel_extra_it_says_what_to_install(
    stored: tuple[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, run_id = stored
    monkeypatch.setitem(sys.modules, "errorflow.reports.otlp", None)  # import fails
    code, err = cli(capsys, "export", run_id, "--format", "otlp-json", "--db", db)
    assert code == 2 and OTEL_MISSING.split(":")[0] in err and "errorflow[otel]" in err
    code, err = cli(capsys, "export", run_id, "--otlp", "http://127.0.0.1:1", "--db", db)
    assert code == 2 and "errorflow[otel]" in err


def test_ground_truth_of_a_scenario_that_no_longer_loads_is_left_out(
    stored: tuple[str, str],
) -> None:
    db, run_id = stored
    run = get_run(Path(db), run_id)
    assert run is not None
    facts = scenario_facts(run)
    assert facts.truth == {"papers": ["bahdanau2015", "shaw2018", "vaswani2017"]}
    assert facts.prompts["writer"].startswith("You are a writer")
    broken = dict(run)
    broken["scenario_json"] = run["scenario_json"].replace('"seed": ', '"seed": "x", "s": ')
    kept = scenario_facts(broken)  # type: ignore[arg-type]
    assert kept.truth == facts.truth  # kept with the run: the scenario is not needed
    broken["truth"] = None  # a run stored before the truth was kept
    facts = scenario_facts(broken)  # type: ignore[arg-type]
    assert facts.truth == {} and facts.note and "ground truth not computed" in facts.note
