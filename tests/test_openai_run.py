"""Whole runs on the openai backend, against a fake Chat Completions server on 127.0.0.1.

The real `openai` SDK talks to a real local HTTP server; the runs go over the embedded
MQTT broker and are recorded. Checks: a 429 is waited out by the shared limiter (no
model call, no retry, no event), a 5xx goes through the policy layer (retried: the
trial is scored), the answer comes back as a tool call and is scored, usage with the
server's cached prompt tokens is counted; the key stays out of the store and the logs.
A server that answers what is not a Chat Completion, keeps failing with 5xx or never
answers measured nothing: every trial is an infra fault, and the command exits 1 saying
so in one line. The dry run, the response cache and cassettes serve this API as they
serve the Messages API.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from errorflow.bus.url import BrokerURL
from errorflow.cli.main import main
from errorflow.models.backends import ConfigurationError, check_backends
from errorflow.models.serving import Serving, serving
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.scenario.overrides import apply
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.score import Outcome
from tests.conftest import scenario
from tests.fake_anthropic import Received
from tests.fake_openai import GARBAGE, ChatModel, FakeOpenAI, Reply, openai_error

API_KEY = "sk-proj-SECRETKEYdonotleak1234567890"
TOOL_SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c"  # in contamination's injected error text
AGENTS = ("researcher", "writer")


def on_server(url: str, trials: int, *agents: str, **update: object) -> Scenario:
    real = {"backend": "openai", "model": "gpt-test", "base_url": url}
    changes: dict[str, object] = {f"agents.{a}.model": real for a in agents or AGENTS}
    changes.update(update)
    return apply(scenario("contamination", trials=trials), changes)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def cli_args(url: str, db: Path, *more: str) -> list[str]:
    real = f'{{backend: openai, model: gpt-test, base_url: "{url}"}}'
    return [
        "run",
        "contamination",
        "--trials",
        "6",
        "--db",
        str(db),
        "-q",
        "--json",
        "--yes",
        "--set",
        f"agents.researcher.model={real}",
        "--set",
        f"agents.writer.model={real}",
        "--set",
        "tools.search_papers.faults.0.p=0.5",
        *more,
    ]


async def test_a_run_end_to_end(
    embedded: BrokerURL,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    caplog.set_level(logging.DEBUG)
    db = tmp_path / "a.db"
    with FakeOpenAI(respond=ChatModel()) as fake:
        s = on_server(fake.url, 4, **{"tools.search_papers.faults.0.p": 0.5})
        fake.script(
            Reply(429, openai_error("requests", "slow down"), headers={"retry-after": "0.05"}),
            Reply(503, openai_error("server_error", "The server is overloaded")),
        )
        with serving(Serving()) as served:
            result = await run_scenario(s, RunOptions(broker=embedded, db_path=db))
        requests = [r.body for r in fake.received]

    assert result.infra_faults == 0 and sum(result.outcomes.values()) == 4
    assert {t.outcome for t in result.scores} <= {Outcome.SUCCESS, Outcome.CONTAINED}
    assert requests[0] == requests[1] == requests[2]  # paced, then retried by the policy
    [limiter] = served.limiters.values()
    assert limiter.stats.rate_limited == 1 and limiter.stats.requests == len(requests)
    per = result.summary["metrics"]["per_trial"]
    assert per["retries"] == 0.25  # the 503, once in 4 trials; the 429 is no retry
    assert per["model_calls"] * 4 == len(requests) - 1  # every request but the paced one
    assert per["input_tokens"] > 0 and per["output_tokens"] > 0
    [traffic] = served.traffic.values()
    assert traffic.cache_read_tokens > 0  # the repeated system prompt and tools
    assert traffic.input_tokens + traffic.cache_read_tokens == per["input_tokens"] * 4

    sent = json.dumps(requests)
    assert API_KEY not in sent and TOOL_SECRET not in sent
    raw_db = b"".join(p.read_bytes() for p in tmp_path.glob("a.db*") if p.is_file())
    assert API_KEY.encode() not in raw_db and TOOL_SECRET.encode() not in raw_db
    assert API_KEY not in caplog.text
    with sqlite3.connect(db) as conn:
        events = [
            json.loads(e)["payload"]
            for (e,) in conn.execute("SELECT envelope FROM events WHERE type = 'model_error'")
        ]
    assert [(e["code"], e["status"]) for e in events] == [("transient", 503)]


# -- a server that does not answer as a Chat Completions server does -----------------------

NOT_ANSWERING: dict[str, tuple[Reply, str]] = {
    **{k: (r, "answered a Chat Completions request with ") for k, r in GARBAGE.items()},
    "a 500 to every request": (
        Reply(500, openai_error("server_error", "boom")),
        "failed (HTTP 500 server_error: boom)",
    ),
    "a 400 to every request": (
        Reply(400, openai_error("invalid_request_error", "bad")),
        "refused the request (HTTP 400 invalid_request_error: bad)",
    ),
    "silence": (Reply(hang=True), "did not answer in 0.5s"),
}


def errorflow_run(url: str, db: Path) -> subprocess.CompletedProcess[str]:
    spec = f"{{backend: openai, model: gpt-test, base_url: '{url}'}}"
    command = ["run", "contamination", "--trials", "2", "-q", "--yes", "--db", str(db)]
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "errorflow",
            *command,
            "--set",
            f"agents.researcher.model={spec}",
            "--model-timeout",
            "0.5",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OPENAI_API_KEY": API_KEY},
    )


@pytest.mark.parametrize("kind", list(NOT_ANSWERING))
def test_a_server_not_answering_the_api_fails_every_trial_as_infra_and_the_run(
    tmp_path: Path, kind: str
) -> None:
    reply, says = NOT_ANSWERING[kind]
    db = tmp_path / "g.db"
    with FakeOpenAI(respond=lambda _: reply) as fake:
        done = errorflow_run(fake.url, db)
    host = fake.url.removeprefix("http://").removesuffix("/v1")
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


# -- a server that answers one request at a time ------------------------------------------


def one_slow_reply(
    slow_s: float, normal_s: float, slow_call: int = 0
) -> Callable[[Received], Reply]:
    """The fake model, every reply `normal_s` long but call number `slow_call`'s (a runaway
    reply), `slow_s`; pings (the check's, the waits') are answered at once."""
    model = ChatModel(seed=3)
    calls = itertools.count()

    def respond(got: Received) -> Reply:
        reply = model(got)
        if got.body["messages"] == [{"role": "user", "content": "ping"}]:
            return reply
        return replace(reply, delay_s=slow_s if next(calls) == slow_call else normal_s)

    return respond


@pytest.mark.parametrize(
    ("busy_wait", "in_flight", "runaway"), [(None, 1, 1), ("0", 1, 1), (None, 3, 1), (None, 1, 0)]
)
def test_one_runaway_reply_is_the_only_request_that_times_out(
    busy_wait: str | None, in_flight: int, runaway: int, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """As llama.cpp's: one request at a time, each written to its end, even after its
    client gave up. A reply takes 0.6 s against the 1 s timeout; the second one runs away
    (2.8 s), or the first, before any reply said how long one takes. Without the wait
    (`--busy-wait 0`), a request sent while the server still writes it queues behind it
    and times out too, abandoned in turn, and the next queues behind that: trial after
    trial. With the wait (the default) the requests after the timeout are held until the
    server answers a ping, the ones queued in the limiter included (`max_in_flight=3`);
    one set free with less time left than a reply takes (half the timeout before any
    reply came) is not sent. So the runaway is the only request that times out, and the
    trials that start once the server answered are scored."""
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    respond = one_slow_reply(slow_s=2.8, normal_s=0.6, slow_call=runaway)
    more = [] if busy_wait is None else ["--busy-wait", busy_wait]
    with FakeOpenAI(respond=respond, one_at_a_time=True, serves_models=False) as fake:
        real = f'{{backend: openai, model: gpt-test, base_url: "{fake.url}"}}'
        code, out, said = cli(
            capsys, "run", "contamination", "--trials", "5", "--db", str(tmp_path / "b.db"),
            "-q", "--json", "--yes", "--set", f"agents.researcher.model={real}",
            "--set", f"max_in_flight={in_flight}", "--max-concurrency", "1",
            "--model-timeout", "1", *more,
        )  # fmt: skip
    assert code == 1  # a trial was an infra fault
    doc = json.loads(out)
    infra = doc["outcomes"]["infra_fault"]
    [traffic] = doc["model_traffic"].values()
    if busy_wait is None:
        assert traffic["timed_out"] == 1, traffic  # the runaway alone
        assert traffic["held"] >= 1 and 1 <= infra <= 3, doc["outcomes"]
        assert traffic["requests"] == traffic["replies"] + 1  # none held was sent in vain
        assert traffic["checks"] >= 1  # the one-token requests the wait sent
    else:
        assert traffic["timed_out"] >= 4 and infra >= 4, (traffic, doc["outcomes"])
        assert traffic["held"] == 0
    # every request the server got is counted: the trials', the wait's checks and the one
    # message that checked the server before the run (it serves no model lookup)
    assert len(fake.received) == traffic["requests"] + traffic["checks"] + 1, traffic
    assert "hint:" not in said  # one request at a time already


def researcher_one_at_a_time(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, reply_s: float, *more: str,
    props: dict[str, Any] | None = None,
) -> tuple[int, str, str, FakeOpenAI]:  # fmt: skip
    """`errorflow run contamination -q --yes *more` with the researcher on a fake server
    that answers one request at a time, each reply `reply_s` long (`props`: what its
    `GET /props` says): the exit code, stdout, stderr and the server."""
    respond = one_slow_reply(slow_s=reply_s, normal_s=reply_s)
    with FakeOpenAI(respond=respond, one_at_a_time=True, serves_models=False, props=props) as fake:
        real = f'{{backend: openai, model: gpt-test, base_url: "{fake.url}"}}'
        code, out, said = cli(
            capsys, "run", "contamination", "--db", str(tmp_path / "r.db"), "-q", "--yes",
            "--set", f"agents.researcher.model={real}", *more,
        )  # fmt: skip
    return code, out, said, fake


def test_requests_that_time_out_in_a_one_at_a_time_servers_queue_get_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three trials at once, each reply 0.7 s against a 1 s timeout: the server answers
    the first, the others time out in its queue. The command says what to change."""
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    code, _, said, fake = researcher_one_at_a_time(
        capsys, tmp_path, 0.7, "--trials", "3", "--model-timeout", "1"
    )
    assert code == 1
    [hint] = [line for line in said.splitlines() if line.startswith("hint:")]
    assert f"to gpt-test @ {fake.url[7:-3]} timed out with up to 3 in flight" in hint
    assert "needs --max-concurrency 1 (the others then wait for a free slot here" in hint


def test_trials_queued_for_a_model_server_are_not_bus_faults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six trials at once behind `--max-concurrency 1`, each reply 0.5 s: the last
    trial's request waits 2.5 s for a slot, past the 2 s trial timeout. Time at a model
    server does not count against it (errorflow/core/outside_time.py): every trial is
    scored, none a bus fault."""
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    code, out, _, _ = researcher_one_at_a_time(
        capsys, tmp_path, 0.5, "--trials", "6", "--json", "--set", "max_in_flight=6",
        "--max-concurrency", "1", "--trial-timeout", "2",
    )  # fmt: skip
    doc = json.loads(out)
    assert code == 0, doc["outcomes"]
    assert doc["outcomes"]["bus_fault"] == 0 and doc["outcomes"]["infra_fault"] == 0
    [traffic] = doc["model_traffic"].values()
    assert traffic["requests"] == traffic["replies"] == 6 and traffic["peak_in_flight"] == 1


def test_a_lost_message_is_still_a_bus_fault_when_the_agents_call_a_model_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The researcher's result never reaches the writer (a partition, no resends): once
    its request was answered, nothing of the trial is at a model server, and the trial
    timeout runs out as it would without one."""
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    cut = "{partitions: [{between: [researcher, writer], from_s: 0, to_s: 100000}], max_resends: 0}"
    code, out, _, _ = researcher_one_at_a_time(
        capsys, tmp_path, 0.5, "--trials", "2", "--json", "--set", f"bus={cut}",
        "--max-concurrency", "1", "--trial-timeout", "1.5",
    )  # fmt: skip
    doc = json.loads(out)
    assert code == 0 and doc["outcomes"]["bus_fault"] == 2, doc["outcomes"]
    [traffic] = doc["model_traffic"].values()
    assert traffic["replies"] == 2  # each researcher was answered before its trial ran out


def test_a_llama_cpp_server_that_says_it_answers_one_at_a_time_is_sent_one_at_a_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hint's run, against a server whose `GET /props` says `total_slots: 1` (as
    llama.cpp's does): no --max-concurrency needed, no request waits in its queue. The
    last trial's request waits 1.4 s for a slot, past `--trial-timeout 1`: time at a
    model server does not count against it (none is a bus fault)."""
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    code, out, said, _ = researcher_one_at_a_time(
        capsys, tmp_path, 0.7, "--trials", "3", "--json", "--model-timeout", "1",
        "--trial-timeout", "1", props={"total_slots": 1},
    )  # fmt: skip
    assert code == 0, said
    doc = json.loads(out)
    [traffic] = doc["model_traffic"].values()
    assert doc["outcomes"]["infra_fault"] == 0 and traffic["timed_out"] == 0
    assert doc["outcomes"]["bus_fault"] == 0
    assert traffic["server_slots"] == 1 and traffic["peak_in_flight"] == 1


# -- keys --------------------------------------------------------------------------------


def test_a_missing_key_stops_the_run_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-unused")
    code, _, err = cli(capsys, *cli_args("http://127.0.0.1:9/v1", tmp_path / "x.db"))
    assert code == 2
    assert "agent(s) researcher, writer use the openai backend but OPENAI_API_KEY is not set" in err
    assert not (tmp_path / "x.db").exists()


def test_each_backend_gets_its_own_key(monkeypatch: pytest.MonkeyPatch) -> None:
    s = apply(
        scenario("contamination"),
        {
            "agents.researcher.model": {
                "backend": "openai",
                "model": "m",
                "base_url": "http://h/v1",
            },
            "agents.writer.model": {"backend": "anthropic", "model": "claude-test"},
        },
    )
    keys = check_backends(s, {"OPENAI_API_KEY": "o-key", "ANTHROPIC_API_KEY": "a-key"})
    assert keys is not None
    assert (keys.get("openai"), keys.get("anthropic")) == ("o-key", "a-key")
    assert repr(keys) == "ApiKeys(anthropic, openai)"  # never a key
    with pytest.raises(ConfigurationError, match=r"agent\(s\) writer use the anthropic backend"):
        check_backends(s, {"OPENAI_API_KEY": "o-key"})


def test_validate_needs_no_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    bundled = Path(__file__).parent.parent / "scenarios" / "contamination.yaml"
    path = tmp_path / "s.yaml"
    path.write_text(
        bundled.read_text().replace(
            "{backend: simulated, profile: small-local}", "{backend: openai, model: gpt-5}"
        )
    )
    code, out, _ = cli(capsys, "validate", str(path))
    assert code == 0 and out.startswith("ok")


# -- the served path: dry run, response cache, cassette ------------------------------------


def test_the_dry_run_renders_chat_completions_requests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a dry run needs no key
    with FakeOpenAI() as fake:
        code, out, _ = cli(capsys, *cli_args(fake.url, tmp_path / "x.db", "--dry-run"))
        assert fake.received == [] and fake.lookups == []
    assert code == 0
    doc = json.loads(out)
    [(label, estimate)] = doc["models"].items()
    assert label == f"gpt-test @ {fake.url.removeprefix('http://').removesuffix('/v1')}"
    assert 0 < estimate["expected"]["calls"] <= estimate["at_most"]["calls"]
    assert estimate["expected"]["cost_usd"] == 0  # a server on this machine costs nothing


def test_a_cached_rerun_and_a_replayed_cassette_ask_no_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    db, cache, cassette = tmp_path / "x.db", tmp_path / "cache", tmp_path / "session.json"
    # a model that samples: only the stored replies give the same outcomes again
    with FakeOpenAI(respond=ChatModel(fabricate=0.5)) as fake:
        args = cli_args(fake.url, db, "--propagation", "both")
        code, out, _ = cli(capsys, *args, "--cache", str(cache))
        assert code == 0
        recorded = json.loads(out)
        sent = len(fake.received)
        code, out, _ = cli(capsys, *args, "--cache", str(cache))
        assert code == 0 and len(fake.received) == sent  # not one request
        cached = json.loads(out)
    monkeypatch.delenv("OPENAI_API_KEY")  # the server is gone, and so is the key
    code, _, _ = cli(
        capsys,
        "export",
        recorded["group_id"],
        "--format",
        "cassette",
        "-o",
        str(cassette),
        "--db",
        str(db),
    )
    assert code == 0 and API_KEY not in cassette.read_text()
    code, out, _ = cli(capsys, *args, "--backend", f"replay:{cassette}")
    assert code == 0
    replayed = json.loads(out)
    for doc in (cached, replayed):
        for label, arm in doc["arms"].items():
            assert arm["outcomes"] == recorded["arms"][label]["outcomes"]
            assert arm["metrics"]["per_trial"] == recorded["arms"][label]["metrics"]["per_trial"]
    [traffic] = replayed["model_traffic"].values()
    assert traffic["replayed"] == sent and traffic["requests"] == 0


def test_the_command_line_loads_the_openai_sdk_only_for_a_real_model() -> None:
    code = "import sys, errorflow.cli.main; print('openai' in sys.modules)"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert loaded.stdout.strip() == "False"
