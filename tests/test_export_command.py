"""`errorflow export --format cassette` and `--backend replay:FILE`: a fake-server run,
recorded, replays to the same outcomes with no server and no API key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from errorflow.cli.commands.export import FORMATS
from errorflow.cli.main import main
from errorflow.store.readers import trial_rows
from tests.fake_anthropic import FakeAnthropic
from tests.fake_model import FakeModel

KEY = "sk-ant-test-export-0123456789"
TOOL_SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c"  # in contamination's injected error text


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def scenario_args(url: str, db: Path) -> list[str]:
    real = f'{{backend: anthropic, model: claude-test, base_url: "{url}"}}'
    return [
        "contamination", "--trials", "8", "--db", str(db), "-q", "--json",
        "--set", f"agents.researcher.model={real}", "--set", f"agents.writer.model={real}",
        "--set", "tools.search_papers.faults.0.p=0.5", "--propagation", "both",
    ]  # fmt: skip


def outcomes(db: Path, doc: dict[str, object]) -> dict[str, list[str]]:
    arms = doc["arms"]
    assert isinstance(arms, dict)
    return {
        label: [t["outcome"] for t in trial_rows(db, arm["run_id"])] for label, arm in arms.items()
    }


def test_a_cassette_replays_a_run_exactly_with_no_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    db, cassette = tmp_path / "x.db", tmp_path / "session.json"
    # a model that samples: only a faithful replay gives the same outcomes again
    with FakeAnthropic(respond=FakeModel(fabricate=0.5)) as fake:
        args = scenario_args(fake.url, db)
        code, out, _ = cli(capsys, "run", *args)
        assert code == 0
        recorded = json.loads(out)
        requests = len(fake.received)
    # the server is gone, and so is the key
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    group = recorded["group_id"]
    code, _, err = cli(capsys, "export", group, "--format", "cassette", "-o", str(cassette),
                       "--db", str(db))  # fmt: skip
    assert code == 0 and "wrote" in err
    text = cassette.read_text()
    assert KEY not in text and TOOL_SECRET not in text
    assert len(json.loads(text)["exchanges"]) == requests
    code, out, _ = cli(capsys, "run", *args, "--backend", f"replay:{cassette}")
    assert code == 0
    replayed = json.loads(out)
    assert outcomes(db, replayed) == outcomes(db, recorded)
    [traffic] = replayed["model_traffic"].values()
    assert traffic["replayed"] == requests and traffic["requests"] == 0


def test_a_cassette_of_another_experiment_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    db, cassette = tmp_path / "x.db", tmp_path / "session.json"
    with FakeAnthropic(respond=FakeModel()) as fake:
        args = scenario_args(fake.url, db)
        code, out, _ = cli(capsys, "run", *args)
    arm = json.loads(out)["arms"]["explicit"]["run_id"]  # one run: the explicit arm only
    assert cli(capsys, "export", arm, "--format", "cassette", "-o", str(cassette),
               "--db", str(db))[0] == 0  # fmt: skip
    code, _, err = cli(capsys, "run", *args, "--seed", "4", "--backend", f"replay:{cassette}")
    assert code == 2 and "not this experiment" in err and len(err.strip().splitlines()) == 1


def test_a_request_the_cassette_lacks_is_an_infrastructure_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    db, cassette = tmp_path / "x.db", tmp_path / "session.json"
    with FakeAnthropic(respond=FakeModel()) as fake:
        args = [a for a in scenario_args(fake.url, db) if a not in ("--propagation", "both")]
        code, out, _ = cli(capsys, "run", *args)
    run_id = json.loads(out)["run_id"]
    assert cli(capsys, "export", run_id, "--format", "cassette", "-o", str(cassette),
               "--db", str(db))[0] == 0  # fmt: skip
    doc = json.loads(cassette.read_text())
    doc["exchanges"] = [e for e in doc["exchanges"] if e["trial"] != 2]
    cassette.write_text(json.dumps(doc))
    code, out, err = cli(capsys, "run", *args, "--backend", f"replay:{cassette}")
    assert code == 1 and "infrastructure fault" in err and "cassette" in err
    assert json.loads(out)["outcomes"]["infra_fault"] == 1


def test_a_run_without_model_traffic_has_no_cassette(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "x.db"
    code, out, _ = cli(capsys, "run", "contamination", "--trials", "2", "--db", str(db), "--json")
    code, _, err = cli(capsys, "export", json.loads(out)["run_id"], "--format", "cassette",
                       "--db", str(db))  # fmt: skip
    assert code == 2 and "no model traffic" in err


def test_a_format_is_one_function_and_one_entry() -> None:
    assert "cassette" in FORMATS
    assert all(callable(f.write) and f.help for f in FORMATS.values())
