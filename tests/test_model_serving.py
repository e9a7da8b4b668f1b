"""Whole runs on a real-model backend served through the rate limiter and the response
cache, against the fake Messages API (real SDK, real HTTP, embedded MQTT broker)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from errorflow.bus.url import BrokerURL
from errorflow.models.rate_limit import RateLimits
from errorflow.models.serving import Serving, serving
from errorflow.runtime.runner import RunOptions, RunResult, run_scenario
from errorflow.scenario.overrides import apply
from errorflow.scenario.spec.model import Scenario
from tests.conftest import scenario
from tests.fake_anthropic import FakeAnthropic
from tests.fake_model import FakeModel

KEY = "sk-ant-test-serving-0123456789"
AGENTS = ("researcher", "writer")


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def on_fake(
    url: str, trials: int, model: str = "claude-test", agents: tuple[str, ...] = AGENTS
) -> Scenario:
    """contamination with its agents on the fake server; the search fails half the time
    (seeded), so trials differ."""
    real = {"backend": "anthropic", "model": model, "base_url": url}
    changes: dict[str, object] = {f"agents.{a}.model": real for a in agents}
    changes.update({"tools.search_papers.faults.0.p": 0.5, "max_in_flight": 64})
    return apply(scenario("contamination", trials=trials), changes)


async def run(s: Scenario, broker: BrokerURL, db: Path) -> RunResult:
    return await run_scenario(s, RunOptions(broker=broker, db_path=db, keep_messages=False))


def per_trial(result: RunResult) -> list[str]:
    return [score.outcome.value for score in result.scores]


@pytest.mark.slow
async def test_200_trials_never_have_more_than_the_limit_in_flight(
    embedded: BrokerURL, tmp_path: Path
) -> None:
    limits = RateLimits(concurrency=3)
    with (
        FakeAnthropic(respond=FakeModel(delay_s=0.005)) as fake,
        serving(Serving(limits)) as served,
    ):
        s = on_fake(fake.url, 200, agents=("researcher",))  # the writer simulated
        result = await run(s, embedded, tmp_path / "a.db")
    [limiter] = served.limiters.values()
    assert fake.peak_in_flight <= 3  # 64 trials in flight, 3 requests at a time
    assert limiter.stats.peak_in_flight == 3  # the limit, reached: it held the rest back
    assert limiter.stats.requests == len(fake.received) >= 250  # 1 or 2 calls a trial
    assert sum(result.outcomes.values()) == 200 and result.infra_faults == 0


async def test_a_burst_of_429s_slows_the_run_and_changes_no_outcome(
    embedded: BrokerURL, tmp_path: Path
) -> None:
    db = tmp_path / "a.db"
    with FakeAnthropic(respond=FakeModel()) as fake:
        s = on_fake(fake.url, 20)
        with serving(Serving()):
            calm = await run(s, embedded, db)
        fake.burst_429(12, retry_after="0.05")
        with serving(Serving()) as served:
            bursty = await run(s, embedded, db)
    [limiter] = served.limiters.values()
    assert fake.refused == limiter.stats.rate_limited == 12
    assert limiter.stats.paced_s >= 0.05  # requests waited for the server's retry-after
    assert per_trial(bursty) == per_trial(calm)
    # Which request writes the prompt cache and which reads it depends on when they
    # reach the server, so the split of cached input may move; nothing else may.
    cache = {"cache_read_tokens", "cache_write_tokens"}
    calm_costs = {k: v for k, v in calm.summary["metrics"]["per_trial"].items() if k not in cache}
    bursty_costs = {
        k: v for k, v in bursty.summary["metrics"]["per_trial"].items() if k not in cache
    }
    assert bursty_costs == calm_costs
    with sqlite3.connect(db) as conn:  # not one model error was recorded: nothing was scored
        errors = conn.execute(
            "SELECT COUNT(*) FROM events WHERE run_id = ? AND type = 'model_error'",
            (bursty.run_id,),
        ).fetchone()[0]
    assert errors == 0


async def test_a_second_identical_run_with_the_cache_makes_no_request(
    embedded: BrokerURL, tmp_path: Path
) -> None:
    db, cache = tmp_path / "a.db", tmp_path / "cache"
    # A model that samples: without the cache, two runs would differ.
    with FakeAnthropic(respond=FakeModel(fabricate=0.5)) as fake:
        s = on_fake(fake.url, 20)
        with serving(Serving(cache_dir=cache)) as one:
            first = await run(s, embedded, db)
        sent = len(fake.received)
        with serving(Serving(cache_dir=cache)) as two:
            second = await run(s, embedded, db)
        assert len(fake.received) == sent  # not one request
        other = apply(s, {"agents.writer.model.model": "claude-other"})
        with serving(Serving(cache_dir=cache)) as three:
            await run(other, embedded, db)
    assert per_trial(second) == per_trial(first)
    assert second.summary["metrics"]["per_trial"] == first.summary["metrics"]["per_trial"]
    [c1], [c2] = one.traffic.values(), two.traffic.values()
    assert (c1.cache_hits, c1.cache_misses) == (0, sent)
    assert (c2.cache_hits, c2.cache_misses, c2.input_tokens) == (sent, 0, 0)
    # another model is another experiment: nothing of it is served from the cache
    assert all(c.cache_hits == 0 and c.cache_misses > 0 for c in three.traffic.values())


async def test_cached_prompt_tokens_are_counted_apart(embedded: BrokerURL, tmp_path: Path) -> None:
    with FakeAnthropic(respond=FakeModel()) as fake:
        with serving(Serving()) as served:
            result = await run(on_fake(fake.url, 5), embedded, tmp_path / "a.db")
        bodies = [r.body for r in fake.received]
    [counts] = served.traffic.values()
    assert counts.cache_write_tokens > 0 and counts.cache_read_tokens > counts.cache_write_tokens
    per = result.summary["metrics"]["per_trial"]
    total_in = counts.input_tokens + counts.cache_read_tokens + counts.cache_write_tokens
    assert per["input_tokens"] * 5 == pytest.approx(total_in)  # budgets see every input token
    assert all(b["system"][0]["cache_control"] == {"type": "ephemeral"} for b in bodies)
    assert json.dumps(bodies).count('"cache_control"') == 2 * len(bodies)  # system, last tool
