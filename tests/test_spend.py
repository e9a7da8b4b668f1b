"""`--dry-run` and the cost check, as a user runs them, against the fake Messages API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from errorflow.cli.main import main
from tests.fake_anthropic import FakeAnthropic
from tests.fake_model import FakeModel

KEY = "sk-ant-test-spend-0123456789"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with FakeAnthropic(respond=FakeModel()) as server:
        yield server


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def on_fake(fake: FakeAnthropic, db: Path, *more: str) -> list[str]:
    """A bundled scenario, both its agents on the fake server."""
    real = f'{{backend: anthropic, model: claude-test, base_url: "{fake.url}"}}'
    return [
        "run", "contamination", "--trials", "6", "--db", str(db), "-q",
        "--set", f"agents.researcher.model={real}", "--set", f"agents.writer.model={real}",
        "--set", "tools.search_papers.faults.0.p=0.5", *more,
    ]  # fmt: skip


def test_the_real_run_stays_within_what_the_dry_run_said(
    fake: FakeAnthropic, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "x.db"
    args = on_fake(fake, db, "--propagation", "both", "--json")
    code, out, _ = cli(capsys, *args, "--dry-run", "--price", "claude-test=3/15")
    assert code == 0
    assert fake.received == [] and not db.exists()  # nothing was called or stored
    doc = json.loads(out)
    assert doc["dry_run"] and doc["runs"] == 2 and doc["trials"] == 12
    [(label, estimate)] = doc["models"].items()
    assert label == f"claude-test @ {fake.url.removeprefix('http://')}"
    expected, at_most = estimate["expected"], estimate["at_most"]
    assert 0 < expected["calls"] <= at_most["calls"]
    assert 0 < expected["cost_usd"] <= at_most["cost_usd"]

    code, out, _ = cli(capsys, *args)
    assert code == 0
    real = json.loads(out)
    sent = real["model_traffic"][label]
    paid_input = (
        sent["input_tokens_uncached"] + sent["cache_read_tokens"] + sent["cache_write_tokens"]
    )
    assert 0 < sent["requests"] == len(fake.received) <= at_most["calls"]
    assert paid_input <= at_most["input_tokens"]
    assert sent["output_tokens"] <= at_most["output_tokens"]
    model_calls = sum(
        arm["metrics"]["per_trial"]["model_calls"] * arm["trials"] for arm in real["arms"].values()
    )
    assert model_calls <= at_most["calls"]
    # the simulated path is an estimate, not a bound: here within a factor of two
    assert expected["calls"] / 2 <= sent["requests"] <= expected["calls"] * 2


def test_the_dry_run_table_names_expected_and_at_most(
    fake: FakeAnthropic, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, *on_fake(fake, tmp_path / "x.db", "--dry-run"))
    assert code == 0 and "expected" in out and "at most" in out and "Dry run" in out
    assert fake.received == []


def test_a_run_over_the_cost_limit_is_refused_without_yes(
    fake: FakeAnthropic, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "x.db"
    dear = ("--price", "claude-test=1000/1000", "--max-cost", "0.01")
    code, _, err = cli(capsys, *on_fake(fake, db, *dear))
    assert code == 2  # stdin is no terminal here: nobody to ask
    assert "--max-cost" in err and "--yes" in err and len(err.strip().splitlines()) == 1
    assert fake.received == [] and not db.exists()
    code, _, _ = cli(capsys, *on_fake(fake, db, *dear, "--yes"))
    assert code == 0 and fake.received


def test_a_local_server_without_a_price_is_not_checked(
    fake: FakeAnthropic, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = cli(capsys, *on_fake(fake, tmp_path / "x.db", "--max-calls", "1"))
    assert code == 0  # 127.0.0.1: nothing to pay, whatever the number of calls


def test_a_simulated_dry_run_costs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "run", "contamination", "--db", str(tmp_path / "x.db"), "--dry-run")
    assert code == 0 and "costs nothing" in out


def test_the_command_line_loads_no_model_sdk_until_a_real_model_is_used() -> None:
    import subprocess
    import sys

    code = "import sys, errorflow.cli.main; print('anthropic' in sys.modules)"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert loaded.stdout.strip() == "False"  # 3 s of imports every command would pay
