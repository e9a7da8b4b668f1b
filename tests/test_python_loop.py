"""Python agents (`behaviour: python`) run end to end: the user's callable, written to a
file beside the scenario, calls its tools through the gate and is scored. A relaying
agent succeeds fault-free; under a tool fault it is contaminated implicitly and
contained explicitly (as scored, trial by trial); a raising callable is an agent
failure, and so is one that never returns (its own time runs out); tool, agent and
crash faults fire on it and are counted; the model handle works; the same seed gives
the same events."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from errorflow.agents.own import python_loop
from errorflow.agents.own.context import AgentReply, Need, ToolResult
from errorflow.agents.own.python_loop import _reply
from errorflow.bus.transport import InProcessBus
from errorflow.cli.main import main
from errorflow.protocol.envelope import Envelope, Kind, Status
from errorflow.protocol.result import ResultPayload
from errorflow.runtime.runner import RunOptions, RunResult, run_scenario
from errorflow.scenario.loader import load
from errorflow.scenario.overrides import with_settings
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.score import Outcome
from tests.test_runner import events_by_trial, normalised

AGENTS = """
import asyncio

from errorflow import AgentContext, AgentReply

async def relay(ctx: AgentContext) -> AgentReply:
    found, missing = {}, []
    for need in ctx.needs:
        result = await ctx.call_tool(need.tool, need.arguments)
        if result.ok:
            found[need.id] = result.value
        else:
            missing.append(need.id)
    return AgentReply(claims=found, unresolved=missing)

async def boom(ctx: AgentContext) -> AgentReply:
    await ctx.call_tool(ctx.needs[0].tool, ctx.needs[0].arguments)
    raise ValueError("could not parse the answer")

async def stuck(ctx: AgentContext) -> AgentReply:
    if ctx.trial % 2 == 0:
        await asyncio.Event().wait()  # a reply of its own service that never comes
    return await relay(ctx)

async def timeout(ctx: AgentContext) -> AgentReply:
    raise TimeoutError("the agent's own client timed out")

async def asks_model(ctx: AgentContext) -> AgentReply:
    reply = await ctx.model.complete()
    for _ in range(20):
        if reply.answer is not None:
            return reply.answer
        for call in reply.calls:
            await ctx.run_call(call)
        reply = await ctx.model.complete()
    raise RuntimeError("the model never answered")

async def chatty(ctx: AgentContext) -> AgentReply:
    for _ in range(100):
        await ctx.model.complete()
    return AgentReply()

async def says_less(ctx: AgentContext) -> dict:
    answer = await relay(ctx)
    answer.status, answer.confidence = "partial_failure", 0.3
    return answer

async def upstream_seen(ctx: AgentContext) -> AgentReply:
    up = ctx.upstream[0]
    flags = [f"{e.origin}:{e.code}:{e.hops}" for e in up.errors]
    return AgentReply(
        claims={c.key: c.value for c in up.claims if c.certain},
        unresolved=list(up.unresolved),
        flags=flags,
        text=f"{up.sender} {up.status} {up.confidence}",
    )
"""


def scenario_file(
    tmp_path: Path,
    function: str = "agents.py:relay",
    faults: str = "[]",
    *,
    agent_faults: str = "[]",
    policy: str = "{strategy: tell-model, tell_class: true}",
    trials: int = 20,
    downstream: str | None = None,
    profile: str = "small-local",
    clerk_extra: str = "",
) -> Path:
    (tmp_path / "agents.py").write_text(AGENTS)
    sends = "\n    sends_to: [last]" if downstream else ""
    last = (
        f"\n  last: {{role: last, behaviour: python, function: '{downstream}'}}"
        if downstream
        else ""
    )
    text = f"""
name: own
seed: 5
trials: {trials}
world:
  metrics: {{fin.rev.2024: 1284000000, fin.cost.2024: 873000000}}
tools:
  kpi:
    kind: metric_store
    faults: {faults}
agents:
  clerk:
    role: clerk
    behaviour: python
    function: '{function}'
    tools: [kpi]
    model: {{profile: {profile}}}
    policy: {policy}
    faults: {agent_faults}{sends}{clerk_extra}{last}
task:
  prompt: What were the 2024 revenue and costs?
  needs:
    - {{id: revenue, tool: kpi, arg: name, wording: 2024 revenue, value: fin.rev.2024}}
    - {{id: costs, tool: kpi, arg: name, wording: 2024 costs, value: fin.cost.2024}}
"""
    path = tmp_path / "own.yaml"
    path.write_text(textwrap.dedent(text))
    return path


async def run(
    scenario: Scenario, db: Path, propagation: str = "explicit", trial_timeout_s: float = 120.0
) -> RunResult:
    options = RunOptions(bus=InProcessBus(), db_path=db, trial_timeout_s=trial_timeout_s)
    return await run_scenario(with_settings(scenario, propagation=propagation), options)


def finals(result: RunResult) -> dict[int, Envelope]:
    return {
        t: next(m for m in ms if m.recipient == "runner" and m.kind is Kind.RESULT)
        for t, ms in result.messages.items()
    }


async def test_a_relaying_agent_succeeds_without_faults(tmp_path: Path) -> None:
    s = load(scenario_file(tmp_path))
    result = await run(s, tmp_path / "a.db")
    assert result.outcomes["success"] == 20
    final = finals(result)[0]
    assert final.status is Status.OK and final.confidence == 1.0
    answer = ResultPayload.from_wire(final.payload).answer
    assert {c.key: c.value for c in answer.claims} == {
        "revenue": 1284000000,
        "costs": 873000000,
    }


async def test_a_tool_fault_contaminates_implicitly_and_is_contained_explicitly(
    tmp_path: Path,
) -> None:
    s = load(scenario_file(tmp_path, faults="[{kind: transient, p: 0.3}]", trials=40))
    explicit = await run(s, tmp_path / "e.db", "explicit")
    implicit = await run(s, tmp_path / "i.db", "implicit")
    e = {sc.trial: sc.outcome for sc in explicit.scores}
    i = {sc.trial: sc.outcome for sc in implicit.scores}
    hit = [t for t in e if e[t] is not Outcome.SUCCESS]
    assert 5 <= len(hit) <= 35, "the fault fired in some trials, not all"
    # Same seeds, same faults: the trials the fault hit, and only those, differ.
    assert all(e[t] is Outcome.CONTAINED for t in hit)
    assert all(i[t] is Outcome.CONTAMINATED for t in hit)
    assert all(i[t] is Outcome.SUCCESS for t in e if t not in hit)
    fired = explicit.summary["tool_faults"]
    assert sum(f["fired"] for f in fired.values()) == len(hit)
    # The explicit result says what happened; the implicit one says ok.
    ef, inf = finals(explicit)[hit[0]], finals(implicit)[hit[0]]
    assert ef.status is Status.PARTIAL_FAILURE and ef.errors[0].code.value == "transient"
    assert inf.status is Status.OK and not inf.errors


async def test_the_gate_policy_applies(tmp_path: Path) -> None:
    """A retrying policy retries for the agent: the same faults, fewer failures."""
    faults = "[{kind: transient, p: 0.3}]"
    bare = await run(load(scenario_file(tmp_path, faults=faults)), tmp_path / "a.db")
    retried = await run(
        load(scenario_file(tmp_path, faults=faults, policy="{strategy: classify}")),
        tmp_path / "b.db",
    )
    assert retried.outcomes["success"] > bare.outcomes["success"]
    assert (
        retried.summary["metrics"]["per_trial"]["backend_calls"]
        > bare.summary["metrics"]["per_trial"]["backend_calls"]
    )


async def test_a_raising_callable_is_an_agent_failure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(python_loop, "_said", set())  # none said before in this process
    s = load(scenario_file(tmp_path, "agents.py:boom", trials=4))
    explicit = await run(s, tmp_path / "e.db")
    assert explicit.outcomes["contained"] == 4
    # What it raised is said (once) and kept with its loop stop, for the trace: the wire's
    # errors carry only the class
    raised = "ValueError: could not parse the answer"
    said = [r.getMessage() for r in caplog.records if "its code failed" in r.getMessage()]
    assert len(said) == 1 and raised in said[0], said
    with sqlite3.connect(tmp_path / "e.db") as conn:
        rows = conn.execute("SELECT envelope FROM events WHERE type = 'loop_stop'").fetchall()
    stops = [json.loads(raw)["payload"] for (raw,) in rows]
    assert len(stops) == 4 and all(stop["error"] == raised for stop in stops), stops
    final = finals(explicit)[0]
    assert final.status is Status.FAILED
    error = final.errors[0]
    assert (error.code.value, error.origin, error.tool) == ("internal_error", "clerk", "clerk")
    assert ResultPayload.from_wire(final.payload).stopped.code_value == "internal_error"
    # A builtin exception is classified like a tool's.
    s = load(scenario_file(tmp_path, "agents.py:timeout", trials=2))
    final = finals(await run(s, tmp_path / "t.db"))[0]
    assert final.errors[0].code.value == "timeout"


async def test_a_callable_that_never_returns_is_the_agents_timeout_not_a_bus_fault(
    tmp_path: Path,
) -> None:
    """Past `function_timeout_s` of its own time the callable is cancelled and the agent
    fails with a timeout, reported as a raised TimeoutError is; before, its trial ran
    into the runner's trial timeout and was scored a bus fault."""
    extra = "\n    function_timeout_s: 0.3"
    path = scenario_file(tmp_path, "agents.py:stuck", trials=4, clerk_extra=extra)
    for propagation in ("explicit", "implicit"):
        result = await run(load(path), tmp_path / f"{propagation}.db", propagation, 5.0)
        assert result.outcomes["bus_fault"] == 0, result.outcomes
        stuck = finals(result)[0]
        payload = ResultPayload.from_wire(stuck.payload)
        assert payload.stopped is not None and payload.stopped.code_value == "timeout"
        outcomes = {sc.trial: sc.outcome for sc in result.scores}
        assert outcomes[1] is outcomes[3] is Outcome.SUCCESS
        if propagation == "explicit":  # reported: contained
            [error] = stuck.errors
            assert (error.code.value, error.origin) == ("timeout", "clerk")
            assert outcomes[0] is outcomes[2] is Outcome.CONTAINED
        else:  # an empty success, as `except Exception: return []` makes it
            assert stuck.status is Status.OK and not stuck.errors
            assert outcomes[0] is outcomes[2] is Outcome.CONTAMINATED


def relaying_over(tmp_path: Path, tool: str, trials: int, needs: str, policy: str = "") -> Scenario:
    """A clerk running `relay` over one Python tool, `metric`: the function `tool:` in
    TOOLS, written beside the scenario; `needs` and `policy` (YAML) as given."""
    (tmp_path / "agents.py").write_text(AGENTS)
    (tmp_path / "tools.py").write_text(TOOLS)
    text = f"""
    name: one-tool
    seed: 5
    trials: {trials}
    tools:
      metric: {{kind: python, function: 'tools.py:{tool}'}}
    agents:
      clerk:
        role: clerk
        behaviour: python
        function: 'agents.py:relay'
        tools: [metric]
        {f"policy: {policy}" if policy else ""}
    task:
      prompt: What were the figures?
      needs: {needs}
    """
    path = tmp_path / "one-tool.yaml"
    path.write_text(textwrap.dedent(text))
    return load(path)


TOOLS = """
import asyncio
import time
from pathlib import Path

async def slow_metric(name: str) -> int:
    await asyncio.sleep(0.3)  # a service of the user's that answers slowly
    return {"rev": 1284, "cost": 873}[name]

class Figure:
    pass

def object_metric(name: str) -> object:
    return Figure()  # no JSON form: its str() holds a memory address

def blocked_metric(name: str) -> int:
    import threading
    threading.Event().wait()  # a synchronous read with no timeout, that never returns
    return 1

async def slower_metric(name: str) -> int:
    await asyncio.sleep(1.2)
    return {"rev": 1284, "cost": 873}[name]

async def counted_metric(name: str) -> int:
    with open(Path(__file__).with_name("calls.txt"), "a") as calls:
        calls.write(name + "\\n")
    await asyncio.sleep(0.4)
    return {"rev": 1284, "cost": 873}[name]

async def stubborn_metric(name: str) -> int:
    done = time.monotonic() + 2.5
    while time.monotonic() < done:  # will not be cancelled for 2.5 s
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            pass
    return 1
"""


async def test_time_in_real_tools_does_not_run_out_the_trial_timeout(tmp_path: Path) -> None:
    """Each trial calls a Python tool twice, 0.3 s a call, against a trial timeout of
    0.4 s: the time a trial's calls spend outside errorflow does not count
    (errorflow/core/outside_time.py), so every trial is scored, none a bus fault."""
    needs = (
        "[{id: revenue, tool: metric, wording: revenue, args: {name: rev}},"
        " {id: costs, tool: metric, wording: costs, args: {name: cost}}]"
    )
    s = relaying_over(tmp_path, "slow_metric", 3, needs)
    result = await run(s, tmp_path / "s.db", trial_timeout_s=0.4)
    assert result.outcomes["success"] == 3, result.outcomes


async def test_the_truth_is_worked_out_once_and_off_the_event_loop(tmp_path: Path) -> None:
    """A Python tool's ground truth calls it once per need, for the whole run (the
    runner's truth is the in-process agents' too), in a thread: the loop never stalls
    for the 0.4 s each call takes."""
    needs = (
        "[{id: revenue, tool: metric, wording: revenue, args: {name: rev}},"
        " {id: costs, tool: metric, wording: costs, args: {name: cost}}]"
    )
    s = relaying_over(tmp_path, "counted_metric", 1, needs)
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticking() -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        while not done.is_set():
            await asyncio.sleep(0.02)
            now = loop.time()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(ticking())
    result = await run(s, tmp_path / "t.db")
    done.set()
    await ticker
    assert result.outcomes["success"] == 1, result.outcomes
    calls = (tmp_path / "calls.txt").read_text().split()
    assert sorted(calls) == ["cost", "cost", "rev", "rev"]  # two for the truth, two the trial's
    assert max(gaps) < 0.3


async def test_a_tool_that_will_not_stop_counts_no_more_past_its_timeout(
    tmp_path: Path,
) -> None:
    """A Python tool that swallows its timeout's cancellation is outside no longer than
    its `per_call_timeout_s` (0.2 s): past it the trial timeout (1 s) runs again, and the
    trial is a bus fault at about 1.2 s, not kept going until the code gives in."""
    needs = "[{id: revenue, tool: metric, wording: revenue, args: {name: rev}, expect: 1}]"
    policy = "{strategy: tell-model, retry: {per_call_timeout_s: 0.2}}"
    s = relaying_over(tmp_path, "stubborn_metric", 1, needs, policy)
    result = await run(s, tmp_path / "s.db", trial_timeout_s=1.0)
    assert result.outcomes["bus_fault"] == 1, result.outcomes


async def test_a_tool_answer_that_is_not_json_is_the_tools_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An object with no JSON form is the tool's failure (contained, explicit), not its
    `str()`, which no two calls share; without `expect`, `validate` refuses the need at
    its line, as a run does."""
    needs = "[{id: revenue, tool: metric, wording: revenue, args: {name: rev}, expect: 1}]"
    result = await run(relaying_over(tmp_path, "object_metric", 2, needs), tmp_path / "o.db")
    assert result.outcomes["contained"] == 2, result.outcomes
    relaying_over(tmp_path, "object_metric", 2, needs.replace(", expect: 1", ""))
    assert main(["validate", str(tmp_path / "one-tool.yaml")]) == 2
    said = capsys.readouterr().err
    assert "one-tool.yaml:" in said and "task.needs.0:" in said
    assert "metric returned a Figure, which is not JSON" in said


def test_a_synchronous_tool_that_never_returns_does_not_hold_the_run_open(
    tmp_path: Path,
) -> None:
    """Its call times out (`per_call_timeout_s`), the trial is scored, and the run ends:
    the thread the call was left in is not waited for (errorflow/core/daemon_call.py)."""
    needs = "[{id: revenue, tool: metric, wording: revenue, args: {name: rev}, expect: 1}]"
    policy = "{strategy: tell-model, retry: {per_call_timeout_s: 0.3}}"
    relaying_over(tmp_path, "blocked_metric", 2, needs, policy)
    command = [sys.executable, "-m", "errorflow", "run", str(tmp_path / "one-tool.yaml")]
    command += ["--db", str(tmp_path / "b.db"), "--json", "-q"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcomes"]["contained"] == 2


OVERLAPPING = {
    "agents.py": """
import asyncio
from errorflow import AgentContext, AgentReply

async def both(ctx: AgentContext) -> AgentReply:
    slow = asyncio.create_task(ctx.call_tool("metric", {"name": "slow"}))
    await asyncio.sleep(0.01)
    await ctx.call_tool("metric", {"name": "fast"})  # starts later, ends first
    return AgentReply(claims={"a": (await slow).value})
""",
    "tools.py": """
import asyncio

async def metric(name: str) -> object:
    await asyncio.sleep(0.2 if name == "slow" else 0.05)
    return 1234 if name == "slow" else "abc"  # digits to change, and none
""",
    "s.yaml": """
name: overlapping
seed: 5
trials: 3
tools:
  metric:
    kind: python
    function: 'tools.py:metric'
    faults: [{kind: corrupt, mode: digits, p: 1.0}]
agents:
  clerk: {role: clerk, behaviour: python, function: 'agents.py:both', tools: [metric]}
task:
  prompt: What were the figures?
  needs: [{id: a, tool: metric, wording: a, args: {name: slow}, expect: 1234}]
""",
}


async def test_each_of_a_python_agents_calls_at_once_names_its_own_faults(
    tmp_path: Path,
) -> None:
    """Two calls at once, the later one ending first: the fault that changed the slow
    call's answer is its own, counted once, and the one that left the fast call's answer
    as it was is not counted (a gate-wide index gave 6 calls, then 0)."""
    for name, text in OVERLAPPING.items():
        (tmp_path / name).write_text(text)
    result = await run(load(tmp_path / "s.yaml"), tmp_path / "o.db")
    assert result.outcomes["contaminated"] == 3, result.outcomes
    fired = result.summary["tool_faults"]["tools.metric.faults[0]"]
    assert (fired["fired"], fired["times"]) == (3, 3), fired


async def test_agent_faults_and_a_crash_fire_on_a_python_agent(tmp_path: Path) -> None:
    corrupt = "[{kind: corrupt, p: 0.5, claims: 1.0}]"
    s = load(scenario_file(tmp_path, agent_faults=corrupt, trials=20))
    result = await run(s, tmp_path / "c.db")
    counted = result.summary["agent_faults"]["clerk.corrupt"]
    assert 0 < counted["fired"] < 20
    assert result.outcomes["contaminated"] == counted["fired"]
    # A crash strikes at a model call the agent makes through its handle.
    crash = "[{kind: crash, trial: 1}]"
    path = scenario_file(
        tmp_path, "agents.py:asks_model", agent_faults=crash, trials=3, profile="frontier"
    )
    result = await run(load(path), tmp_path / "k.db")
    assert result.summary["agent_faults"]["clerk.crash"]["fired"] == 1
    stops = {t: ResultPayload.from_wire(m.payload).stopped for t, m in finals(result).items()}
    assert stops[1] is not None and stops[1].code_value == "crashed"
    assert stops[0] is None and stops[2] is None


async def test_the_budget_bounds_its_model_calls(tmp_path: Path) -> None:
    policy = "{strategy: tell-model, budget: {max_model_calls_per_task: 3}}"
    path = scenario_file(tmp_path, "agents.py:chatty", policy=policy, trials=2)
    result = await run(load(path), tmp_path / "b.db")
    assert result.summary["metrics"]["per_trial"]["model_calls"] == 3
    final = finals(result)[0]
    assert final.errors[0].code.value == "budget_exhausted"
    stopped = ResultPayload.from_wire(final.payload).stopped
    assert stopped is not None and stopped.code_value == "budget_exhausted"


async def test_the_model_handle_calls_the_agents_model(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, "agents.py:asks_model", trials=5, profile="frontier")
    result = await run(load(path), tmp_path / "m.db")
    assert result.outcomes["success"] >= 4
    assert result.summary["metrics"]["per_trial"]["model_calls"] >= 2


async def test_upstream_messages_and_a_stated_status(tmp_path: Path) -> None:
    faults = "[{kind: permission, p: 1.0}]"
    path = scenario_file(tmp_path, faults=faults, trials=2, downstream="agents.py:upstream_seen")
    final = finals(await run(load(path), tmp_path / "u.db"))[0]
    answer = ResultPayload.from_wire(final.payload).answer
    assert answer.flags == ["clerk:permission_denied:0"]
    assert answer.text == "clerk failed 0.4" and answer.unresolved == ["revenue", "costs"]
    assert final.errors[0].hops == 1 and final.status is Status.FAILED
    # An agent can say less than errorflow derived (explicit), never more.
    final = finals(
        await run(load(scenario_file(tmp_path, "agents.py:says_less")), tmp_path / "s.db")
    )[0]
    assert final.status is Status.PARTIAL_FAILURE and final.confidence == 0.3


async def test_same_seed_same_events(tmp_path: Path) -> None:
    s = load(scenario_file(tmp_path, faults="[{kind: transient, p: 0.3}]", trials=10))
    first = await run(s, tmp_path / "a.db")
    second = await run(s, tmp_path / "b.db")
    assert normalised(first) == normalised(second)
    ev1 = events_by_trial(tmp_path / "a.db", first.run_id)
    assert ev1 == events_by_trial(tmp_path / "b.db", second.run_id) and ev1


def test_what_the_callable_is_given_and_returns() -> None:
    from errorflow.models.backend import NeedView

    need = Need.of(NeedView("q", "quote", "sku", "a quote", "SKU-1", fixed={"quantity": 2}))
    assert need.arguments == {"quantity": 2, "sku": "SKU-1"}
    hidden = Need.of(NeedView("q", "quote", "sku", "a quote", None))
    assert hidden.arguments == {} and hidden.identifier is None
    failed = ToolResult.of(
        "kpi", {"ok": False, "tool": "kpi", "code": "transient", "retryable": True, "message": "m"}
    )
    assert (failed.ok, failed.code, failed.retryable) == (False, "transient", True)
    raw = ToolResult.of("kpi", {"ok": False, "tool": "kpi", "error": "HTTP 503"})
    assert (raw.ok, raw.code, raw.message) == (False, None, "HTTP 503")
    assert ToolResult.of("kpi", {"ok": True, "tool": "kpi", "result": 3}).value == 3
    assert _reply({"a": 1}).claims == {"a": 1}
    for bad in ([1], AgentReply(claims={"a": object()}), AgentReply(confidence=2.0)):
        try:
            _reply(bad)
        except (TypeError, ValueError):
            continue
        raise AssertionError(f"{bad!r} accepted")
