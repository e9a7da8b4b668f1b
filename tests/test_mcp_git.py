"""A published MCP server from the package index, mcp-server-git (the reference server),
run against a repository the test makes: its tools discovered, faulted and scored.
Everything stays local: the server reads the repository and nothing else."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from errorflow.agents.tool_gate import TraceEntry
from errorflow.bus.transport import InProcessBus
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.scenario.loader import load
from errorflow.scenario.overrides import with_settings
from errorflow.scoring.score import Truth
from errorflow.world.mcp.host import close_sessions
from errorflow.world.tool_catalog import ToolCatalog
from tests.conftest import IN_CI

# The dev extra installs the server, and CI has git: there a missing one fails the tests.
_MISSING = [
    what
    for what, found in (
        ("mcp-server-git", shutil.which("mcp-server-git")),
        ("git", shutil.which("git")),
    )
    if found is None
]
if _MISSING and IN_CI:
    pytest.fail(f"CI is set but {' and '.join(_MISSING)} is not installed")
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"needs {' and '.join(_MISSING)}")


@pytest.fixture(autouse=True, scope="module")
def _sessions_closed() -> Iterator[None]:
    yield
    close_sessions()


def repository(where: Path) -> Path:
    """Two commits at fixed dates, so the log is the same on every run."""
    repo = where / "repo"
    repo.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Ada",
        "GIT_AUTHOR_EMAIL": "ada@example.org",
        "GIT_COMMITTER_NAME": "Ada",
        "GIT_COMMITTER_EMAIL": "ada@example.org",
    }

    def git(*args: str, date: str | None = None) -> None:
        stamped = {**env, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else env
        subprocess.run(["git", *args], cwd=repo, env=stamped, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    (repo / "README").write_text("first\n")
    git("add", "README")
    git("commit", "-q", "-m", "Initial import", date="2024-01-01T10:00:00+00:00")
    (repo / "README").write_text("first\nsecond\n")
    git("commit", "-q", "-am", "Second line", date="2024-02-01T10:00:00+00:00")
    return repo


def scenario_file(tmp_path: Path) -> Path:
    repo = repository(tmp_path)
    server = json.dumps({"command": "mcp-server-git", "args": ["--repository", "repo"]})
    path = tmp_path / "git.yaml"
    path.write_text(
        f"""
name: git-history
seed: 11
trials: 20
max_in_flight: 4
tools:
  log:
    kind: mcp
    server: {server}
    tool: git_log
    faults: [{{kind: transient, p: 0.3}}, {{kind: corrupt, mode: truncate, p: 0.2}}]
  show:
    kind: mcp
    server: {server}
    tool: git_show
    faults: [{{kind: wrong_entity, p: 0.3}}]
agents:
  historian: {{role: researcher, tools: [log, show], sends_to: [writer]}}
  writer: {{role: writer}}
task:
  prompt: Summarise the repository's history.
  needs:
    - id: latest
      tool: log
      wording: the latest commit
      args: {{repo_path: {repo}, max_count: 1}}
    - id: first
      tool: show
      wording: the first commit
      args: {{repo_path: {repo}, revision: HEAD~1}}
    - id: last
      tool: show
      wording: the last commit
      args: {{repo_path: {repo}, revision: HEAD}}
"""
    )
    return path


def test_its_tools_and_schemas_are_discovered(tmp_path: Path) -> None:
    scenario = load(scenario_file(tmp_path))
    catalog = ToolCatalog.of(scenario)
    assert catalog.schemas["log"]["required"] == ["repo_path"]  # the server's own schema
    assert "max_count" in catalog.schemas["log"]["properties"]
    assert catalog.mcp["show"].remote == "git_show"
    truth = Truth(scenario)
    latest = truth.values["latest"]
    assert isinstance(latest, str) and "Second line" in latest and "Initial import" not in latest
    assert "Initial import" in str(truth.values["first"])


async def test_faulted_and_scored(tmp_path: Path) -> None:
    scenario = load(scenario_file(tmp_path))
    trace: list[TraceEntry] = []

    def keep(agent: str, trial: int, entries: list[TraceEntry]) -> None:
        trace.extend(entries)

    for propagation in ("explicit", "implicit"):
        options = RunOptions(
            bus=InProcessBus(),
            db_path=tmp_path / f"{propagation}.db",
            on_trace=keep,
        )
        result = await run_scenario(with_settings(scenario, propagation=propagation), options)
        assert sum(result.outcomes.values()) == 20 and result.infra_faults == 0
        fired = result.summary["tool_faults"]
        assert fired
        # The silent faults (a truncated log, another commit shown) go unseen and
        # contaminate; the transient ones are retried or reported.
        assert result.outcomes["contaminated"] > 0
    assert any(entry.code == "transient" for entry in trace)
