"""The pydantic-ai adapter: a framework agent whose tools are errorflow's gated tools.
The bundled framework-agent scenario runs under injected tool and agent faults and is
scored in both arms; what the framework's model reads of a failed call is what the
policy tells; the framework's output becomes the reply. With CI set, a missing
pydantic-ai fails these tests (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from errorflow.agents.own.context import AgentReply, ToolResult
from errorflow.bus.transport import InProcessBus
from errorflow.runtime.runner import RunOptions, RunResult, run_scenario
from errorflow.scenario.bundled import bundled
from errorflow.scenario.loader import load
from errorflow.scenario.overrides import with_settings
from errorflow.scenario.spec.model import Scenario
from tests.conftest import require_pydantic_ai
from tests.test_runner import events_by_trial, normalised


@pytest.fixture(autouse=True)
def _pydantic_ai() -> None:
    require_pydantic_ai()


async def run(scenario: Scenario, db: Path, propagation: str = "explicit") -> RunResult:
    options = RunOptions(bus=InProcessBus(), db_path=db)
    return await run_scenario(with_settings(scenario, propagation=propagation), options)


async def test_the_bundled_framework_agent_is_faulted_and_scored(tmp_path: Path) -> None:
    s = load(bundled()["framework-agent"])
    explicit = await run(s, tmp_path / "e.db", "explicit")
    implicit = await run(s, tmp_path / "i.db", "implicit")
    for result in (explicit, implicit):
        assert sum(result.outcomes.values()) == s.trials and result.infra_faults == 0
        tool = result.summary["tool_faults"]
        assert tool["tools.query_metric.faults[0]"]["fired"] > 0  # the timeouts
        assert result.summary["agent_faults"]["analyst.corrupt"]["fired"] > 0
    # The framework's model retries what the policy says is retryable: more backend
    # calls explicitly (implicitly a failure reads as an empty success).
    e_calls = explicit.summary["metrics"]["per_trial"]["backend_calls"]
    i_calls = implicit.summary["metrics"]["per_trial"]["backend_calls"]
    assert e_calls > i_calls
    assert implicit.outcomes["contaminated"] > explicit.outcomes["contaminated"]
    assert explicit.outcomes["contained"] > 0 and implicit.outcomes["contained"] == 0


async def test_the_framework_reads_what_the_policy_tells(tmp_path: Path) -> None:
    """Every call refused (401): explicitly the framework agent is told the class and
    leaves the needs unresolved; implicitly it reads empty answers and claims them."""
    s = load(bundled()["framework-agent"])
    data = s.model_dump(mode="json", by_alias=True)
    data["trials"] = 3
    data["tools"]["query_metric"]["faults"] = [{"kind": "permission", "p": 1.0, "status": 401}]
    data["agents"]["analyst"]["faults"] = []
    data["agents"]["writer"] = {"role": "writer", "behaviour": "python", "function": _relay()}
    s = Scenario.model_validate(data)
    explicit = await run(s, tmp_path / "e.db", "explicit")
    implicit = await run(s, tmp_path / "i.db", "implicit")
    assert explicit.outcomes["contained"] == 3
    assert implicit.outcomes["contaminated"] == 3


def _relay() -> str:
    """A downstream python agent that passes on what it received (this test file's)."""
    return f"{Path(__file__).resolve()}:relay"


async def relay(ctx: Any) -> AgentReply:
    up = ctx.upstream[0]
    return AgentReply(claims={c.key: c.value for c in up.claims}, unresolved=list(up.unresolved))


async def test_same_seed_same_events(tmp_path: Path) -> None:
    s = load(bundled()["framework-agent"]).model_copy(update={"trials": 8})
    first = await run(s, tmp_path / "a.db")
    second = await run(s, tmp_path / "b.db")
    assert normalised(first) == normalised(second)
    ev = events_by_trial(tmp_path / "a.db", first.run_id)
    assert ev == events_by_trial(tmp_path / "b.db", second.run_id) and ev


class Output(BaseModel):
    claims: dict[str, Any]
    unresolved: list[str] = []
    confidence: float | None = None


def test_outputs_become_replies() -> None:
    from errorflow.agents.own.pydantic_ai_adapter import observation, reply_of

    reply = reply_of(Output(claims={"a": 1}, unresolved=["b"], confidence=0.5))
    assert (dict(reply.claims), list(reply.unresolved), reply.confidence) == ({"a": 1}, ["b"], 0.5)
    assert dict(reply_of({"a": 2}).claims) == {"a": 2}
    assert reply_of("plain text").text == "plain text" and not reply_of("x").claims
    same = AgentReply(claims={"c": 3})
    assert reply_of(same) is same
    failed = ToolResult("kpi", False, None, "timeout", "timed out", True)
    assert observation(failed) == {
        "ok": False,
        "result": None,
        "code": "timeout",
        "message": "timed out",
        "retryable": True,
    }
