"""A whole run on the Anthropic backend, against a fake Messages API on 127.0.0.1.

The real SDK talks to a real local HTTP server; the run goes over the embedded MQTT
broker and is recorded. Checks: the server's 429 is waited out by the rate limiter (no
model call, no retry, no event: infrastructure), its 529 goes through our policy
layer; the API key and the secrets planted in a tool's error never reach the store,
the bus, the logs or the model's input.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import pytest

from errorflow.agents.serving import Serving, serving
from errorflow.bus.url import BrokerURL
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.scenario.overrides import apply
from tests.conftest import scenario
from tests.fake_anthropic import FakeAnthropic, Reply, message, tool_use

API_KEY = "sk-ant-api03-SECRETKEYdonotleak1234567890"
TOOL_SECRETS = ["sk-live-4f9a8b7c6d5e4f3a2b1c"]


async def test_anthropic_run_end_to_end(
    embedded: BrokerURL,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    caplog.set_level(logging.DEBUG)
    db = tmp_path / "a.db"
    with FakeAnthropic() as fake:
        model = {"backend": "anthropic", "model": "claude-test", "base_url": fake.url}
        s = apply(
            scenario("contamination", trials=1),
            {
                "agents.researcher.model": model,
                "agents.writer.model": model,
            },
        )
        fake.script(
            Reply(
                429,
                {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}},
                headers={"retry-after": "0.05"},
            ),
            Reply(529, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}),
            Reply(
                200,
                message(
                    [tool_use("toolu_1", "search_papers", {"query": "transformer attention"})],
                    "tool_use",
                    input_tokens=120,
                    output_tokens=30,
                ),
            ),
            Reply(
                200,
                message(
                    [
                        tool_use(
                            "toolu_2",
                            "submit_answer",
                            {
                                "claims": [],
                                "abstained": True,
                                "flags": ["papers: upstream failed"],
                                "unresolved": ["papers"],
                                "text": "Cannot write: the search failed.",
                            },
                        )
                    ],
                    "tool_use",
                    input_tokens=200,
                    output_tokens=40,
                ),
            ),
        )
        with serving(Serving()) as served:
            result = await run_scenario(s, RunOptions(broker=embedded, db_path=db))
        requests = [r.body for r in fake.received]
        headers = [r.headers for r in fake.received]

    assert result.outcomes["contained"] == 1
    assert len(requests) == 4  # 429 paced and sent again, 529 retried by the policy, 2 answers
    assert requests[0] == requests[1] == requests[2]
    assert all(API_KEY in (h.get("x-api-key", "") + h.get("authorization", "")) for h in headers)
    [limiter] = served.limiters.values()
    assert limiter.stats.rate_limited == 1 and 0 < limiter.stats.paced_s <= 0.05
    per = result.summary["metrics"]["per_trial"]
    assert per["model_calls"] == 3 and per["retries"] == 1  # the 429 is neither
    assert per["input_tokens"] == 320 and per["output_tokens"] == 70

    # The writer's model saw the structured upstream failure, not the raw secret.
    writer_input = json.dumps(requests[3])
    assert "permission_denied" in writer_input
    everything_sent_to_models = json.dumps(requests)
    for secret in [API_KEY, *TOOL_SECRETS]:
        assert secret not in everything_sent_to_models
    # Nothing in the store (every message, event and reject) or the logs.
    raw_db = b"".join(p.read_bytes() for p in tmp_path.glob("a.db*"))
    conn = sqlite3.connect(db)
    dumped = "\n".join(conn.iterdump())
    for secret in [API_KEY, *TOOL_SECRETS]:
        assert secret.encode() not in raw_db
        assert secret not in dumped
        assert secret not in caplog.text
    events = [
        json.loads(e)["payload"]
        for (e,) in conn.execute("SELECT envelope FROM events WHERE type = 'model_error'")
    ]
    assert [(e["code"], e["status"]) for e in events] == [("transient", 529)]
