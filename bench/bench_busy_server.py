"""What `--busy-wait` changes against a model server that answers one request at a time
and writes every reply to its end, as llama.cpp's does (the fake Chat Completions server
of tests/fake_openai.py with `one_at_a_time=True`; bench/RESULTS.md, "A model server
still writing a reply its client gave up on").

Each configuration runs `errorflow run contamination --trials N --max-concurrency 1
--set max_in_flight=1 --model-timeout 1` with the researcher on the fake server, every
reply `normal` seconds long but one runaway, with the wait (the default) and without
(`--busy-wait 0`). Printed: infra faults, requests sent, requests timed out, requests
held and held ones not sent. Then 12 trials queued behind `--max-concurrency 1` with a
trial timeout the last ones wait past: their outcomes (none a bus fault: the time at a
model server is not the trial timeout's, errorflow/core/outside_time.py). Not a timing
target: the figures are counts.

    python bench/bench_busy_server.py [--trials N]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# gmqtt's wheel installs a top-level `tests` package: name the repository's first.
_tests = types.ModuleType("tests")
_tests.__path__ = [str(ROOT / "tests")]
sys.modules["tests"] = _tests

from tests.fake_anthropic import Received, Reply  # noqa: E402
from tests.fake_openai import ChatModel, FakeOpenAI  # noqa: E402

#: (reply seconds, runaway seconds, which reply runs away)
CONFIGS = ((0.6, 2.8, 1), (0.8, 3.0, 0))


def responder(normal: float, runaway: float, which: int) -> Callable[[Received], Reply]:
    model = ChatModel(seed=3)
    calls = itertools.count()

    def respond(got: Received) -> Reply:
        reply = model(got)
        if got.body["messages"] == [{"role": "user", "content": "ping"}]:
            return reply  # the check's and the waits' one-token requests
        return replace(reply, delay_s=runaway if next(calls) == which else normal)

    return respond


def one_run(trials: int, normal: float, runaway: float, which: int, wait: bool) -> str:
    respond = responder(normal, runaway, which)
    with FakeOpenAI(respond=respond, one_at_a_time=True, serves_models=False) as fake, \
            tempfile.TemporaryDirectory() as tmp:  # fmt: skip
        spec = f"{{backend: openai, model: local, base_url: '{fake.url}'}}"
        command = [sys.executable, "-m", "errorflow", "run", "contamination",
                   "--trials", str(trials), "-q", "--json", "--yes", "--db", f"{tmp}/b.db",
                   "--set", f"agents.researcher.model={spec}", "--set", "max_in_flight=1",
                   "--max-concurrency", "1", "--model-timeout", "1",
                   *([] if wait else ["--busy-wait", "0"])]  # fmt: skip
        env = {**os.environ, "OPENAI_API_KEY": "sk-bench-local"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    doc = json.loads(done.stdout)
    [t] = doc["model_traffic"].values()
    return (
        f"infra faults {doc['outcomes']['infra_fault']} of {trials}; requests {t['requests']}, "
        f"timed out {t['timed_out']}, held {t['held']} (not sent {t['held_expired']})"
    )


def queued_run(trials: int) -> str:
    """Trials queued behind `--max-concurrency 1`, 0.5 s replies, none a runaway, with a
    trial timeout the last of them waits past: what the trial timeout scored."""
    with FakeOpenAI(respond=responder(0.5, 0.5, 0), one_at_a_time=True,
                    serves_models=False) as fake, tempfile.TemporaryDirectory() as tmp:  # fmt: skip
        spec = f"{{backend: openai, model: local, base_url: '{fake.url}'}}"
        command = [sys.executable, "-m", "errorflow", "run", "contamination",
                   "--trials", str(trials), "-q", "--json", "--yes", "--db", f"{tmp}/q.db",
                   "--set", f"agents.researcher.model={spec}", "--set", "max_in_flight=8",
                   "--max-concurrency", "1", "--trial-timeout", "4"]  # fmt: skip
        env = {**os.environ, "OPENAI_API_KEY": "sk-bench-local"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    outcomes = json.loads(done.stdout)["outcomes"]
    return ", ".join(f"{name} {n}" for name, n in outcomes.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="trials a run (default 20)")
    args = parser.parse_args()
    for normal, runaway, which in CONFIGS:
        nth = "first" if which == 0 else "second"
        print(f"replies {normal} s, the {nth} a runaway of {runaway} s, --model-timeout 1:")
        for wait in (False, True):
            said = one_run(args.trials, normal, runaway, which, wait)
            print(f"  {'with the wait ' if wait else '--busy-wait 0 '} {said}")
    print("12 trials queued behind --max-concurrency 1 (0.5 s replies, 8 in flight, "
          f"--trial-timeout 4): {queued_run(12)}")  # fmt: skip


if __name__ == "__main__":
    main()
