"""Runs with MCP tools: the test server (tests/mcp_server.py) faulted and scored under
both propagations; a server killed mid-run gives infra faults, not outcomes; a server
that cannot start stops the run in one line; the bundled order-desk-mcp."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from errorflow.agents.tool_gate import TraceEntry
from errorflow.bus.transport import InProcessBus
from errorflow.cli.main import main
from errorflow.runtime.runner import RunOptions, RunResult, run_scenario
from errorflow.scenario.bundled import bundled
from errorflow.scenario.loader import load, load_text
from errorflow.scenario.overrides import with_settings
from errorflow.scenario.problems import ScenarioError
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.score import Truth
from errorflow.world.mcp.host import close_sessions
from errorflow.world.mcp.session import server_command
from tests.mcp_support import server


@pytest.fixture(autouse=True, scope="module")
def _sessions_closed() -> Iterator[None]:
    yield
    close_sessions()


def accounts(trials: int = 30, *, faults: bool = True, **extra: Any) -> str:
    spec = json.dumps(server(**extra))
    account_faults = (
        "[{kind: transient, p: 0.2}, {kind: wrong_entity, p: 0.15}, {kind: stale, p: 0.2}]"
        if faults
        else "[]"
    )
    profile_faults = "[{kind: timeout, p: 0.2}]" if faults else "[]"
    return f"""
name: mcp-accounts
seed: 7
trials: {trials}
max_in_flight: 1
tools:
  account:
    kind: mcp
    server: {spec}
    faults: {account_faults}
  profile:
    kind: mcp
    server: {spec}
    faults: {profile_faults}
agents:
  analyst: {{role: researcher, tools: [account, profile], sends_to: [writer]}}
  writer: {{role: writer}}
task:
  prompt: Brief the team on ACME.
  needs:
    - {{id: owner, tool: account, wording: the owner, args: {{account: ACME, field: owner}}}}
    - id: tickets
      tool: account
      wording: open tickets
      args: {{account: ACME, field: open_tickets}}
    - {{id: card, tool: profile, wording: the account card, args: {{account: ACME}}}}
"""


async def run(
    scenario: Scenario,
    db: Path,
    propagation: str = "explicit",
    trace: list[TraceEntry] | None = None,
) -> RunResult:
    def keep(agent: str, trial: int, entries: list[TraceEntry]) -> None:
        if trace is not None:
            trace.extend(entries)

    options = RunOptions(bus=InProcessBus(), db_path=db, on_trace=keep)
    return await run_scenario(with_settings(scenario, propagation=propagation), options)


async def test_time_at_the_server_does_not_run_out_the_trial_timeout(tmp_path: Path) -> None:
    """Two calls of 0.3 s a trial against a trial timeout of 0.4 s: a trial's time at a
    tool's server does not count (errorflow/core/outside_time.py); every trial scored."""
    spec = json.dumps(server())
    text = f"""
name: mcp-slow
seed: 7
trials: 2
tools:
  nap: {{kind: mcp, server: {spec}, tool: sleep}}
agents:
  analyst: {{role: researcher, tools: [nap], sends_to: [writer]}}
  writer: {{role: writer}}
task:
  prompt: Rest twice.
  needs:
    - {{id: first, tool: nap, wording: a nap, args: {{seconds: 0.3}}, expect: awake}}
    - {{id: second, tool: nap, wording: another nap, args: {{seconds: 0.31}}, expect: awake}}
"""
    options = RunOptions(bus=InProcessBus(), db_path=tmp_path / "n.db", trial_timeout_s=0.4)
    result = await run_scenario(load_text(text), options)
    reasons = [sc.reason for sc in result.scores]
    assert result.outcomes["bus_fault"] == 0 and result.outcomes["infra_fault"] == 0, reasons
    assert sum(result.outcomes.values()) == 2


def test_the_ground_truth_is_the_server_answer() -> None:
    truth = Truth(load_text(accounts()))
    assert truth.values["owner"] == "Dana Reyes" and truth.values["tickets"] == 3
    assert truth.values["card"] == {
        "account": "ACME",
        "owner": "Dana Reyes",
        "tier": "gold",
        "open_tickets": 3,
    }


def test_the_ground_truth_of_a_flaky_server_is_asked_again() -> None:
    """A server whose handler fails a call (-32603, passing trouble) is asked again, as a
    flaky Python tool is: `wobbly` answers the third call."""
    text = f"""
name: mcp-wobbly
seed: 7
trials: 1
tools:
  owner: {{kind: mcp, tool: wobbly, server: {json.dumps(server())}}}
agents:
  analyst: {{role: researcher, tools: [owner]}}
task:
  prompt: Who owns ACME?
  needs: [{{id: owner, tool: owner, wording: the owner, args: {{account: ACME}}}}]
"""
    assert Truth(load_text(text)).values["owner"] == "Dana Reyes"


async def test_faulted_and_scored_under_both_propagations(tmp_path: Path) -> None:
    scenario = load_text(accounts())
    trace: list[TraceEntry] = []
    explicit = await run(scenario, tmp_path / "e.db", "explicit", trace)
    implicit = await run(scenario, tmp_path / "i.db", "implicit")
    for result in (explicit, implicit):
        assert sum(result.outcomes.values()) == 30 and result.infra_faults == 0
        fired = result.summary["tool_faults"]
        assert fired, "the injected faults fired"
    # Same seeds, same faults: the silent ones contaminate both; the loud ones only
    # the implicit arm, where they are swallowed.
    assert implicit.outcomes["contaminated"] > explicit.outcomes["contaminated"]
    assert explicit.outcomes["contained"] > 0
    codes = Counter(entry.code for entry in trace)
    assert codes["transient"] and codes["timeout"]


async def test_a_server_killed_mid_run_gives_infra_faults_not_outcomes(tmp_path: Path) -> None:
    # The truth (2 `account` calls, the agents' too) comes first; the server then
    # answers 8 more and exits (a crash) on the next one.
    scenario = load_text(accounts(12, faults=False, env={"DIE_AFTER": "10"}))
    result = await run(scenario, tmp_path / "k.db")
    assert result.infra_faults >= 8, result.outcomes
    scored = sum(n for outcome, n in result.outcomes.items() if outcome != "infra_fault")
    assert scored >= 2 and scored + result.infra_faults == 12
    assert all("is gone" in reason for reason in result.infra_reasons)
    first_lost = min(s.trial for s in result.scores if s.outcome.value == "infra_fault")
    assert all(s.outcome.value == "infra_fault" for s in result.scores if s.trial > first_lost)


def test_a_server_that_cannot_start_stops_the_run_in_one_line(tmp_path: Path) -> None:
    text = accounts(2).replace(json.dumps(sys.executable), json.dumps(str(tmp_path / "nope")))
    path = tmp_path / "s.yaml"
    path.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "errorflow", "run", str(path), "-q", "--db", str(tmp_path / "x.db")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "could not start" in lines[0] and "nope" in lines[0]


@pytest.mark.parametrize(
    ("change", "line", "said"),
    [
        (("kind: mcp", "kind: mcp\n    tool: acount"), "tools.account.tool", "no tool 'acount'"),
        (("field: owner}", "field: ownr}"), "task.needs.0.args", "refuses the need's arguments"),
    ],
)
def test_validate_and_run_check_mcp_tools_against_their_servers_at_the_files_lines(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: tuple[str, str],
    line: str,
    said: str,
) -> None:
    """What only the server knows (its tools, their schemas) is checked by `validate`
    too, and `run` says it before any arm starts, each at the file's line."""
    path = tmp_path / "s.yaml"
    path.write_text(accounts(2).replace(*change, 1))
    db = str(tmp_path / "x.db")
    for argv in (["validate", str(path)], ["run", str(path), "--propagation", "both", "--db", db]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"{path}:" in err and f": {line}: " in err and said in err, err
        assert "arm 1" not in err
        located = err.split(f"{path}:", 1)[1].split(":")[:2]
        assert all(n.isdigit() for n in located), err  # file:line:col


def test_validate_json_says_a_server_that_cannot_start_in_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(accounts(2).replace(json.dumps(sys.executable), json.dumps("nope-xyz"), 1))
    assert main(["validate", str(path), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and "could not start" in doc["error"], doc


async def test_needs_are_checked_against_the_server_schema(tmp_path: Path) -> None:
    text = accounts(2).replace("field: owner}", "field: ownr}")
    with pytest.raises(ScenarioError) as info:
        await run(load_text(text), tmp_path / "a.db")
    problem = info.value.problems[0]
    assert problem.path == "task.needs.0.args" and "field" in problem.message


async def test_the_bundled_order_desk_mcp(tmp_path: Path) -> None:
    scenario = load(bundled()["order-desk-mcp"])
    trace: list[TraceEntry] = []
    result = await run(scenario, tmp_path / "o.db", "implicit", trace)
    assert sum(result.outcomes.values()) == 40 and result.infra_faults == 0
    seen = {(entry.code, (entry.exception or "").split("(")[0]) for entry in trace}
    # An unknown SKU (the words passed as one) is the server's -32602; the 503 injected.
    assert ("invalid_args", "JsonRpcError") in seen
    assert ("transient", "HTTPStatusError") in seen
    assert result.outcomes["contaminated"] > 0


def test_python_as_a_server_command_is_the_python_errorflow_runs_in(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # PATH's `python` is another interpreter (one without errorflow): not the one used
    (tmp_path / "python").write_text("#!/bin/sh\nexit 3\n")
    (tmp_path / "python").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in ("python", "python3", "python3.11"):
        assert server_command(name) == sys.executable
    assert server_command("/usr/bin/env") == "/usr/bin/env"  # a path as it is
    assert server_command("pythonic-server") == "pythonic-server"  # not an interpreter
