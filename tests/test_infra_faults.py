"""Infrastructure faults are never outcomes (issue #18).

A real model server that cannot be reached, refuses the key or has no such model stops
a run before anything is stored; one that goes away during a run makes the trials it
failed `infra_fault`, which are counted, shown and left out of every rate. The
experiment's own failures (429, 529, injected faults) stay outcomes.
"""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import pytest

from errorflow.agents.model_gate import ModelGate
from errorflow.bus.url import BrokerURL
from errorflow.core.simclock import SimClock
from errorflow.core.taxonomy import ErrorCode
from errorflow.models.backend import ModelCallError, ModelRequest, ModelResponse
from errorflow.models.backends import InfrastructureError, check_servers
from errorflow.policies.budget import Budget
from errorflow.protocol.events import AgentEvent
from errorflow.reports.report import (
    ReportJson,
    to_csv,
    to_html,
    to_markdown,
)
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.scenario.overrides import apply
from errorflow.scenario.spec.model import Scenario
from errorflow.scenario.spec.policy import policy_for
from errorflow.scoring.score import Outcome, TrialScore
from tests.conftest import scenario
from tests.fake_anthropic import FakeAnthropic, Reply, message, tool_use, unused_url
from tests.test_report import report_of

API_KEY = "sk-ant-api03-INFRAKEYdonotleak1234567890"


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)


def on_server(url: str, model: str = "claude-test", **update: object) -> Scenario:
    """The contamination scenario with its researcher on a real-model backend."""
    spec = {"backend": "anthropic", "model": model, "base_url": url}
    return apply(scenario("contamination", **update), {"agents.researcher.model": spec})


def stored_runs(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        return conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] if "runs" in tables else 0


async def refused(s: Scenario, db: Path, embedded: BrokerURL) -> str:
    with pytest.raises(InfrastructureError) as info:
        await run_scenario(s, RunOptions(broker=embedded, db_path=db))
    assert stored_runs(db) == 0  # checked before the run row: nothing stored
    message = str(info.value)
    assert "\n" not in message and API_KEY not in message and "INFRAKEY" not in message
    return message


# -- before the first trial -------------------------------------------------------------


async def test_an_unreachable_server_stops_the_run_before_anything_is_stored(
    embedded: BrokerURL, tmp_path: Path
) -> None:
    url = unused_url()
    message = await refused(on_server(url), tmp_path / "u.db", embedded)
    host = url.removeprefix("http://")
    assert message == (
        f"agents.researcher.model: cannot reach the model server at {host} (connection refused)"
    )


async def test_a_refused_key_stops_the_run_before_anything_is_stored(
    embedded: BrokerURL, tmp_path: Path
) -> None:
    with FakeAnthropic(api_key="sk-ant-another-key-0000000000") as fake:
        message = await refused(on_server(fake.url), tmp_path / "k.db", embedded)
        assert fake.received == []  # no message was sent: the lookup said it all
    assert message.endswith(f"the model server at {fake.url[7:]} refused the API key (401)")


async def test_a_missing_model_stops_the_run_before_anything_is_stored(
    embedded: BrokerURL, tmp_path: Path
) -> None:
    with FakeAnthropic(models={"claude-real"}) as fake:
        message = await refused(on_server(fake.url, "claude-x"), tmp_path / "m.db", embedded)
    assert message.endswith(
        f"model claude-x does not exist on the model server at {fake.url[7:]} (404)"
    )


async def test_agents_sharing_a_server_are_checked_once_and_named_together() -> None:
    url = unused_url()
    spec = {"backend": "anthropic", "model": "claude-test", "base_url": url}
    s = apply(
        scenario("contamination"), {"agents.researcher.model": spec, "agents.writer.model": spec}
    )
    with pytest.raises(InfrastructureError, match=r"^agents.researcher.model, agents.writer"):
        await check_servers(s, API_KEY)


async def test_a_simulated_scenario_needs_no_check(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_backend(*args: object) -> None:
        raise AssertionError("a simulated model was checked")

    monkeypatch.setattr("errorflow.models.backends._anthropic", no_backend)
    await check_servers(scenario("contamination"), None)


async def test_a_simulated_run_is_unchanged_apart_from_the_zero_count(
    embedded: BrokerURL, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_backend(*args: object) -> None:
        raise AssertionError("a simulated model was checked")

    monkeypatch.setattr("errorflow.models.backends._anthropic", no_backend)
    s = scenario("contamination", trials=6, propagation="implicit")
    result = await run_scenario(s, RunOptions(broker=embedded, db_path=tmp_path / "s.db"))
    assert result.infra_faults == 0 and result.infra_reasons == []
    assert result.outcomes == {
        "success": 0,
        "contained": 0,
        "contaminated": 6,
        "bus_fault": 0,
        "infra_fault": 0,
    }
    assert list(result.summary["metrics"]["rates"]) == [
        "success",
        "contained",
        "contaminated",
        "bus_fault",
    ]


# -- during a run -------------------------------------------------------------------------


def submit(n: int) -> Reply:
    """The researcher's whole answer in one reply: it abstains."""
    answer = {"claims": [], "abstained": True, "unresolved": ["papers"], "text": "none"}
    return Reply(body=message([tool_use(f"toolu_{n}", "submit_answer", answer)], "tool_use"))


async def test_a_server_that_goes_away_mid_run_makes_infra_faults_left_out_of_the_rates(
    embedded: BrokerURL, tmp_path: Path
) -> None:
    db = tmp_path / "mid.db"
    # one trial at a time: the first two are answered, then the server stops listening
    with FakeAnthropic(stop_after=2) as fake:
        fake.script(submit(0), submit(1))
        s = on_server(fake.url, trials=4, max_in_flight=1, propagation="explicit")
        result = await run_scenario(s, RunOptions(broker=embedded, db_path=db))
    host = fake.url.removeprefix("http://")

    by_trial = {t.trial: t for t in result.scores}
    assert [by_trial[t].outcome for t in (2, 3)] == [Outcome.INFRA_FAULT] * 2
    assert all(by_trial[t].outcome is not Outcome.INFRA_FAULT for t in (0, 1))
    assert result.infra_faults == 2 and result.outcomes["infra_fault"] == 2
    assert len(result.infra_reasons) == 1
    reason = result.infra_reasons[0]
    assert reason.startswith(f"infra_fault at researcher: cannot reach the model server at {host}")
    assert API_KEY not in reason

    # every rate, its interval and the costs are over the two trials that measured
    m = result.summary["metrics"]
    assert "infra_fault" not in m["rates"]
    assert sum(r["rate"] for r in m["rates"].values()) == pytest.approx(1.0)
    measured = [by_trial[0], by_trial[1]]
    outcome = measured[0].outcome.value
    assert m["rates"][outcome]["rate"] == sum(t.outcome.value == outcome for t in measured) / 2
    assert m["per_trial"]["model_calls"] == sum(t.costs.model_calls for t in measured) / 2

    # the writer (simulated) passed the fault on without asking its model
    for t in (2, 3):
        writer = [e for e in result.messages[t] if e.sender == "writer"]
        assert len(writer) == 1
        assert writer[0].payload["trace"]["failures"] == ["infra_fault"]
        assert writer[0].payload["stopped"] == "infra_fault"
        assert writer[0].payload["trace"]["costs"]["model_calls"] == 0

    conn = sqlite3.connect(db)
    rows = dict(
        conn.execute("SELECT trial, outcome FROM trials WHERE run_id = ?", (result.run_id,))
    )
    assert [rows[2], rows[3]] == ["infra_fault", "infra_fault"]
    labelled = {
        t for (t,) in conn.execute("SELECT trial FROM labels WHERE run_id = ?", (result.run_id,))
    }
    assert labelled == {0, 1}  # an infra-fault trial's messages are not labelled
    (summary,) = conn.execute(
        "SELECT summary_json FROM runs WHERE run_id = ?", (result.run_id,)
    ).fetchone()
    assert json.loads(summary)["outcomes"]["infra_fault"] == 2
    assert API_KEY.encode() not in b"".join(p.read_bytes() for p in tmp_path.glob("mid.db*"))


async def test_rate_limits_and_overload_stay_outcomes(embedded: BrokerURL, tmp_path: Path) -> None:
    def limited(status: int) -> Reply:
        kind = "rate_limit_error" if status == 429 else "overloaded_error"
        return Reply(status, {"type": "error", "error": {"type": kind, "message": "busy"}})

    with FakeAnthropic() as fake:
        fake.script(*[limited(429), limited(529)] * 10)  # more than any retry budget
        s = on_server(fake.url, trials=1)
        result = await run_scenario(s, RunOptions(broker=embedded, db_path=tmp_path / "l.db"))
    assert result.infra_faults == 0
    assert result.scores[0].outcome in (Outcome.CONTAINED, Outcome.CONTAMINATED)


# -- the model gate ---------------------------------------------------------------------


class Flaky:
    """A backend that fails its first `fails` calls with `error`, then answers."""

    def __init__(self, error: ModelCallError, fails: int) -> None:
        self.error, self.fails, self.calls = error, fails, 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        if self.calls <= self.fails:
            raise self.error
        return ModelResponse()


def gate(backend: Flaky) -> ModelGate:
    s = scenario("contamination")
    policy = policy_for(s, "researcher")
    events: list[AgentEvent] = []
    return ModelGate(
        backend,
        policy,
        SimClock(0),
        random.Random(0),
        Budget(policy.budget),
        events.append,
        agent="researcher",
    )


REQUEST = ModelRequest("researcher", "researcher", "", [], [])
REFUSED = ModelCallError(
    ErrorCode.TRANSIENT,
    "cannot reach the model server at 127.0.0.1:9 (connection refused)",
    infrastructure="cannot reach the model server at 127.0.0.1:9 (connection refused)",
)


async def test_a_call_the_infrastructure_failed_for_good_is_an_infra_fault() -> None:
    backend = Flaky(REFUSED, fails=1000)
    with pytest.raises(ModelCallError) as info:
        await gate(backend).complete(REQUEST)
    assert info.value.code is ErrorCode.INFRA_FAULT
    assert str(info.value) == info.value.infrastructure == REFUSED.infrastructure
    assert backend.calls > 1  # retried first, as a transient failure is


async def test_a_connection_failure_a_retry_cures_is_no_fault() -> None:
    backend = Flaky(REFUSED, fails=1)
    assert isinstance(await gate(backend).complete(REQUEST), ModelResponse)


async def test_a_key_refused_is_an_infra_fault_at_once() -> None:
    refused_key = ModelCallError(
        ErrorCode.PERMISSION_DENIED,
        "Anthropic API error HTTP 401",
        status=401,
        infrastructure="the model server at 127.0.0.1:9 refused the API key (401)",
    )
    backend = Flaky(refused_key, fails=1000)
    with pytest.raises(ModelCallError) as info:
        await gate(backend).complete(REQUEST)
    assert info.value.code is ErrorCode.INFRA_FAULT and info.value.status == 401
    assert backend.calls == 1  # not retryable: the code still decides retries


# -- reports ------------------------------------------------------------------------------


def report_with(outcomes: list[Outcome]) -> ReportJson:
    return report_of([TrialScore(i, o, 0) for i, o in enumerate(outcomes)])


def test_a_report_gives_infra_faults_a_count_column_and_rates_without_them() -> None:
    data = report_with([Outcome.SUCCESS, Outcome.CONTAINED, Outcome.INFRA_FAULT])
    header, row = to_csv(data).splitlines()
    columns = header.split(",")
    assert columns[columns.index("bus_fault_ci_high") + 1] == "infra_fault"
    assert "infra_fault_rate" not in columns
    cells = dict(zip(columns, row.split(","), strict=True))
    assert (cells["infra_fault"], cells["success"], cells["success_rate"]) == ("1", "1", "0.5")
    md = to_markdown(data)
    assert "| bus fault | infra fault (not scored) | mean depth |" in md
    assert "| explicit | 1 (50%, CI 9%–91%) |" in md and "| 1 | 0.00 |" in md
    assert "over the trials that measured something" in md
    assert ">infra_fault</text>" in to_html(data)


def test_a_report_without_infra_faults_has_no_such_column() -> None:
    data = report_with([Outcome.SUCCESS, Outcome.CONTAINED])
    assert "infra" not in to_csv(data) and "infra" not in to_markdown(data)
    assert "infra" not in to_html(data)


async def test_a_joining_agent_can_check_only_its_own_server() -> None:
    spec = {"backend": "anthropic", "model": "claude-test", "base_url": unused_url()}
    s = apply(scenario("contamination"), {"agents.writer.model": spec})
    await check_servers(s, API_KEY, only=["researcher"])  # simulated: nothing to ask
    with pytest.raises(InfrastructureError, match=r"^agents.writer.model: cannot reach"):
        await check_servers(s, API_KEY, only=["writer"])
