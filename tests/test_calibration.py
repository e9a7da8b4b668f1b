"""errorflow calibrate recovers known behaviour: against a scripted OpenAI-compatible
server whose behaviour probabilities are set (tests/behaviour_server.py), every
estimate's 95 % interval holds the set value, and another setting moves the estimates;
against the simulated model it recovers the profile's parameters. The server's draws
are seeded by each request, so the figures are the same on every run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.behaviour_server import Behaviour, BehaviourServer

#: The server's probability for each parameter the probes estimate.
SET_AS = {
    "p_self_retry_transient": "retry_transient",
    "p_use_task_wording": "use_wording",
    "p_drop_required_arg": "drop_arg",
    "p_call_unknown_tool": "unknown_tool",
    "p_repair_with_options": "repair_with_options",
    "p_repair_without_options": "repair_without_options",
    "p_repair_missing_arg": "repair_missing",
    "p_flag_empty": "flag_empty",
    "p_fabricate_on_empty": "fabricate_on_empty",
    "p_fabricate_on_missing": "fabricate_on_missing",
    "p_heed_upstream": "heed_upstream",
    "p_keep_own_evidence": "keep_own",
}


def calibrate(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "errorflow", "calibrate", *argv],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "OPENAI_API_KEY": "local", **(env or {})},
    )  # fmt: skip


def against(server: BehaviourServer, out: Path, probes: int, *more: str) -> dict[str, dict]:
    done = calibrate("--backend", "openai", "--model", "behaviour", "--base-url", server.url,
                     "--probes", str(probes), "--out", str(out), "--json", "--concurrency", "4",
                     *more)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_every_interval_holds_the_set_value_and_a_second_setting_moves_them(
    tmp_path: Path,
) -> None:
    first = Behaviour(repair_with_options=0.5, heed_upstream=0.9, seed=1)
    with BehaviourServer(first) as server:
        found = against(server, tmp_path / "a.yaml", 60)
        together = against(server, tmp_path / "a2.yaml", 60, "--confidence", "0.999")
    # Twelve 95 % intervals: about one in twenty misses by chance; at 99.9 % all twelve
    # hold together at least 98.8 % of the time (Bonferroni). The server's draws hang on
    # the requests' bytes, so any change to how a probe is rendered draws anew: a
    # family-wise 95 % check would fail one such change in twenty.
    misses = []
    for param, field in SET_AS.items():
        low, high = found[param]["interval"]
        if not low <= getattr(first, field) <= high:
            misses.append(param)
        low, high = together[param]["interval"]
        assert low <= getattr(first, field) <= high, (param, together[param])
    assert len(misses) <= 2, misses
    # the server never guesses an identifier right: the estimate says so
    assert found["p_guess_identifier"]["successes"] == 0
    second = Behaviour(repair_with_options=0.1, heed_upstream=0.3, keep_own=0.1, seed=2)
    with BehaviourServer(second) as server:
        moved = against(server, tmp_path / "b.yaml", 60)
    for param in ("p_repair_with_options", "p_heed_upstream", "p_keep_own_evidence"):
        assert moved[param]["interval"][1] < found[param]["interval"][0], param
        low, high = moved[param]["interval"]
        assert low <= getattr(second, SET_AS[param]) <= high
    profile = yaml.safe_load((tmp_path / "a.yaml").read_text())
    entry = profile["parameters"]["p_repair_with_options"]
    assert entry["measured"]["probes"] == 60 and entry["measured"]["model"] == "behaviour"
    assert "assumed" in profile["parameters"]["p_guess_identifier"] or (
        profile["parameters"]["p_guess_identifier"]["value"] == 0.0
    )


def test_the_profile_runs_and_record_replays_without_a_server(tmp_path: Path) -> None:
    with BehaviourServer(Behaviour(seed=3)) as server:
        found = against(server, tmp_path / "m.yaml", 5, "--record", str(tmp_path / "c.json"),
                        "--families", "transient,failed_upstream")  # fmt: skip
        asked = len(server.behaviour.requests)
    assert set(found) == {"p_self_retry_transient", "p_heed_upstream"}
    replay = calibrate("--backend", f"replay:{tmp_path / 'c.json'}", "--probes", "5",
                       "--families", "transient,failed_upstream", "--out",
                       str(tmp_path / "r.yaml"), "--json")  # fmt: skip
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout) == found and asked > 0
    # the profile is a profile file a scenario can name
    command = [sys.executable, "-m", "errorflow", "profiles", str(tmp_path / "m.yaml"), "--json"]
    shown = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    params = json.loads(shown)[str(tmp_path / "m.yaml")]["parameters"]
    assert params["p_heed_upstream"]["origin"] == "measured"
    assert params["p_flag_empty"]["origin"] == "assumed"


def test_the_cache_answers_a_second_calibration(tmp_path: Path) -> None:
    with BehaviourServer(Behaviour(seed=4)) as server:
        args = ("--families", "missing_arg", "--cache", str(tmp_path / "cache"))
        one = against(server, tmp_path / "a.yaml", 4, *args)
        asked = len(server.behaviour.requests)
        two = against(server, tmp_path / "b.yaml", 4, *args)
        assert len(server.behaviour.requests) == asked  # no probe asked the server again
    assert one == two


def test_the_simulated_model_is_recovered(tmp_path: Path) -> None:
    done = calibrate("--backend", "simulated", "--base", "frontier", "--probes", "80",
                     "--out", str(tmp_path / "s.yaml"), "--json")  # fmt: skip
    found = json.loads(done.stdout)
    from errorflow.scenario.spec.profiles import PROFILES

    frontier = PROFILES["frontier"]
    # every parameter the probes see directly (the repairs and the drop compound: a repair
    # call may drop its argument, measured apart)
    for param in ("p_self_retry_transient", "p_flag_empty", "p_fabricate_on_empty",
                  "p_fabricate_on_missing", "p_heed_upstream", "p_keep_own_evidence",
                  "p_repair_with_options", "p_repair_missing_arg"):  # fmt: skip
        low, high = found[param]["interval"]
        assert low <= getattr(frontier, param) <= high, (param, found[param])


def test_dry_run_prices_without_calling(tmp_path: Path) -> None:
    done = calibrate("--backend", "openai", "--model", "gpt-4o-mini", "--probes", "10",
                     "--dry-run", "--price", "gpt-4o-mini=0.15/0.6",
                     env={"OPENAI_API_KEY": ""})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "dry run: 100 probes" in done.stdout and "input" in done.stdout and "$" in done.stdout


@pytest.mark.parametrize(
    ("argv", "env", "says"),
    [
        (["--backend", "openai", "--out", "x.yaml"], {}, "needs --model"),
        (["--backend", "openai", "--model", "m", "--out", "x.yaml"], {"OPENAI_API_KEY": ""},
         "OPENAI_API_KEY"),
        (["--backend", "openai", "--model", "m"], {}, "--out FILE"),
        (["--backend", "bogus", "--out", "x.yaml"], {}, "expected one of"),
        (["--backend", "simulated", "--families", "nope", "--out", "x.yaml"], {},
         "unknown probe family"),
        (["--backend", "simulated", "--busy-wait", "-1", "--out", "x.yaml"], {},
         "expected 0 or more"),
        (["--backend", "simulated", "--busy-wait", "1e9", "--out", "x.yaml"], {},
         "(a day)"),
        (["--backend", "openai", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
          "--out", "x.yaml"], {}, "calibration stopped"),
    ],
)  # fmt: skip
def test_clear_errors(argv: list[str], env: dict[str, str], says: str, tmp_path: Path) -> None:
    done = calibrate(*argv, env=env)
    assert done.returncode != 0 and says in done.stderr, done.stderr


def test_the_anthropic_backend_calibrates_too(tmp_path: Path) -> None:
    from tests.fake_anthropic import FakeAnthropic
    from tests.fake_model import FakeModel

    with FakeAnthropic(respond=FakeModel(seed=1)) as fake:
        done = calibrate("--backend", "anthropic", "--model", "claude-test", "--base-url",
                         fake.url, "--probes", "3", "--families", "first_call,failed_upstream",
                         "--out", str(tmp_path / "a.yaml"), "--json",
                         env={"ANTHROPIC_API_KEY": "sk-ant-test"})  # fmt: skip
        asked = len(fake.received)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    # the fake model passes the task's value and heeds every upstream failure
    assert found["p_heed_upstream"]["successes"] == found["p_heed_upstream"]["probes"] == 3
    assert found["p_drop_required_arg"]["successes"] == 0 and asked >= 6


def test_a_server_still_writing_a_reply_its_client_gave_up_on_is_waited_for(
    tmp_path: Path,
) -> None:
    """As llama.cpp's: one request at a time, each to its end. One reply takes four times
    the timeout; the call sent with it queues behind it and times out too. With the
    wait (the default) the calibration goes on once the server answers again; with
    `--busy-wait 0` the calls sent meanwhile time out behind it and stop it."""
    from dataclasses import replace

    from tests.fake_anthropic import Received, Reply
    from tests.fake_openai import ChatModel, FakeOpenAI

    def calibration(*more: str) -> tuple[subprocess.CompletedProcess[str], int]:
        model = ChatModel(seed=1)
        asked: list[bool] = []  # a ping (the check's, the wait's) or not

        def respond(got: Received) -> Reply:
            reply = model(got)
            ping = got.body["messages"] == [{"role": "user", "content": "ping"}]
            asked.append(ping)
            return replace(reply, delay_s=4.0) if asked.count(False) == 1 and not ping else reply

        with FakeOpenAI(respond=respond, one_at_a_time=True, serves_models=False) as fake:
            done = calibrate("--backend", "openai", "--model", "local", "--base-url", fake.url,
                             "--probes", "6", "--families", "failed_upstream",
                             "--model-timeout", "1", "--concurrency", "2",
                             "--out", str(tmp_path / "p.yaml"), "--json", *more)  # fmt: skip
        return done, asked.count(True)

    done, pings = calibration()
    assert done.returncode == 0, done.stderr
    heed = json.loads(done.stdout)["p_heed_upstream"]
    # the slow reply's probe and the one sent with it; every other probe answered (and
    # heeded: the fake model does)
    assert (
        1 <= heed["unclassified"] <= 2
        and heed["successes"] == heed["probes"] == 6 - heed["unclassified"]
    )
    assert pings == 2  # the check's and the wait's
    done, _ = calibration("--busy-wait", "0")
    assert done.returncode == 1 and "in a row failed" in done.stderr, done.stderr
