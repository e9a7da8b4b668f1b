"""A whole run on the Anthropic backend, against a fake Messages API on 127.0.0.1.

The real SDK talks to a real local HTTP server; the run goes over the embedded MQTT
broker and is recorded. Checks: the server's 429 is waited out by the rate limiter (no
model call, no retry, no event: infrastructure), its 529 goes through our policy
layer; the API key and the secrets planted in a tool's error never reach the store,
the bus, the logs or the model's input. A server that answers what is not a Messages API
reply, refuses every request or never answers measured nothing: every trial is an
infra fault, and the command exits 1 saying so in one line.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from errorflow.bus.url import BrokerURL
from errorflow.cli.main import main
from errorflow.models.serving import (
    DEFAULT_REQUEST_TIMEOUT_S,
    MAX_REQUEST_TIMEOUT_S,
    Serving,
    serving,
)
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.scenario.overrides import apply
from errorflow.scoring.score import Outcome
from tests.conftest import scenario
from tests.fake_anthropic import GARBAGE, FakeAnthropic, Reply, error_body, message, tool_use

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


# -- a server that does not answer as a Messages API server does -------------------------

REFUSES_ALL = Reply(400, error_body("invalid_request_error", "malformed request"))
#: Every way of not answering: the garbage kinds, a 400 to every request, silence.
NOT_ANSWERING: dict[str, tuple[Reply, str]] = {
    **{kind: (reply, "answered a Messages API request with ") for kind, reply in GARBAGE.items()},
    "a 400 to every request": (REFUSES_ALL, "refused the request (HTTP 400 invalid_request_error"),
    "silence": (Reply(hang=True), "did not answer in 0.5s"),
}


def errorflow_run(url: str, db: Path, *options: str) -> subprocess.CompletedProcess[str]:
    spec = f"{{backend: anthropic, model: claude-test, base_url: '{url}'}}"
    command = ["run", "contamination", "--trials", "2", "-q", "--yes", "--db", str(db)]
    return subprocess.run(
        [sys.executable, "-m", "errorflow", *command, "--set", f"agents.researcher.model={spec}",
         "--model-timeout", "0.5", *options],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ANTHROPIC_API_KEY": API_KEY},
    )  # fmt: skip


@pytest.mark.parametrize("kind", list(NOT_ANSWERING))
def test_a_server_not_answering_the_api_fails_every_trial_as_infra_and_the_run(
    tmp_path: Path, kind: str
) -> None:
    reply, says = NOT_ANSWERING[kind]
    db = tmp_path / "g.db"
    with FakeAnthropic(respond=lambda _: reply) as fake:
        done = errorflow_run(fake.url, db)
    host = fake.url.removeprefix("http://")
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(
        "error: 2 trials hit an infrastructure fault, not counted: infra_fault at researcher: "
        f"the model server at {host} {says}"
    )
    assert API_KEY not in done.stderr + done.stdout
    with sqlite3.connect(db) as conn:
        outcomes = [o for (o,) in conn.execute("SELECT outcome FROM trials")]
    assert outcomes == ["infra_fault", "infra_fault"]


async def test_a_silent_server_is_an_infra_fault_before_the_trial_timeout(
    embedded: BrokerURL, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    with FakeAnthropic(respond=lambda _: Reply(hang=True)) as fake:
        s = apply(
            scenario("contamination", trials=2),
            {
                "agents.researcher.model": {
                    "backend": "anthropic",
                    "model": "m",
                    "base_url": fake.url,
                }
            },
        )
        options = RunOptions(broker=embedded, db_path=tmp_path / "s.db", trial_timeout_s=3.0)
        with serving(Serving(request_timeout_s=1.0)):
            result = await run_scenario(s, options)
        pings = [r for r in fake.received if r.body["messages"][0]["content"] == "ping"]
        asked = len(fake.received) - len(pings)
    assert [t.outcome for t in result.scores] == [Outcome.INFRA_FAULT] * 2  # not bus_fault
    assert result.infra_reasons == [
        f"infra_fault at researcher: the model server at {fake.url[7:]} did not answer in 1s"
    ]
    assert asked == 2  # one request a trial: silence is not retried
    assert len(pings) == 1  # both timed out together: one wait for the server


def test_the_request_timeout_stays_below_the_trial_timeout() -> None:
    trial_timeout = RunOptions().trial_timeout_s
    assert 0 < DEFAULT_REQUEST_TIMEOUT_S <= MAX_REQUEST_TIMEOUT_S < trial_timeout
    with pytest.raises(ValueError, match="request_timeout_s"):
        Serving(request_timeout_s=trial_timeout)


def test_a_model_timeout_past_the_limit_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "contamination", "--model-timeout", "500"]) == 2
    assert "--model-timeout" in capsys.readouterr().err


@pytest.mark.parametrize("given", ["-1", "nan", "inf", "2days"])
def test_a_busy_wait_that_is_not_0_or_seconds_is_bad_input(
    given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "contamination", "--busy-wait", given]) == 2
    assert "--busy-wait" in capsys.readouterr().err


def test_the_busy_wait_defaults_to_five_request_timeouts() -> None:
    assert Serving(request_timeout_s=2.0).server_wait_s == 10.0
    assert Serving(request_timeout_s=2.0, busy_wait_s=0).server_wait_s == 0
    with pytest.raises(ValueError, match="busy_wait_s"):
        Serving(busy_wait_s=-1)
