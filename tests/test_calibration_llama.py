"""errorflow calibrate against a real local model (SmolLM2-135M through llama.cpp's
OpenAI-compatible server, tests/llama_server.py), and `run --compare-real` with the
profile it wrote.

One server and one calibration, in one test (so one pytest-xdist worker does it): a few
probes of six families (the researcher's transient retry and repair with options; the
writer's heed of an upstream failure, fabrication on a missing or empty value, its own
evidence against two peers) at temperature 0, as the runs use; a profile file whose
measured parameters name the model; a replay of the recorded cassette that gives the
same estimates with no server. Then the real model against its calibrated simulation
on `contamination` (two agents) and on `research-chain`, where it plays all three
agents of a researcher → analyst → writer chain: every trial scored, no infrastructure
fault, a row per agent, the interval printed. Slow (seconds a reply): two probes a
family, three trials a comparison."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.llama_server import LlamaServer, require_llama

FAMILIES = (
    "transient,wrong_arg_with_options,failed_upstream,missing_upstream,empty_upstream,"
    "disagreeing_peer"
)
MEASURED = {
    "p_self_retry_transient",
    "p_repair_with_options",
    "p_heed_upstream",
    "p_fabricate_on_missing",
    "p_fabricate_on_empty",
    "p_keep_own_evidence",
}
PROBES = 2
TRIALS = 3
ENV = {**os.environ, "OPENAI_API_KEY": "local", "COLUMNS": "120"}  # the server checks no key


def _errorflow(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "errorflow", *argv], capture_output=True,
                          text=True, timeout=1500, env=ENV)  # fmt: skip


def _calibrate(*argv: str) -> subprocess.CompletedProcess[str]:
    return _errorflow("calibrate", *argv, "--probes", str(PROBES), "--families", FAMILIES,
                      "--json")  # fmt: skip


@dataclass(frozen=True)
class Calibrated:
    server: LlamaServer
    gguf: Path
    workdir: Path
    done: subprocess.CompletedProcess[str]

    @property
    def profile(self) -> Path:
        return self.workdir / "m.yaml"

    def model_sets(self, *agents: str) -> list[str]:
        """`--set` options that give each agent the real model (replies bounded by
        max_tokens: an agent whose only tool is submit_answer is asked for it by name)."""
        spec = (f"{{backend: openai, model: '{self.gguf}', base_url: '{self.server.url}', "
                "max_tokens: 160, temperature: 0}")  # fmt: skip
        return [arg for a in agents for arg in ("--set", f"agents.{a}.model={spec}")]


@contextmanager
def _calibrated(workdir: Path) -> Iterator[Calibrated]:
    python, gguf = require_llama()
    with LlamaServer(python, gguf, workdir) as server:
        # at the temperature the runs use (0): the profile is of the model the compare runs
        done = _calibrate("--backend", "openai", "--model", str(gguf), "--base-url", server.url,
                          "--temperature", "0", "--concurrency", "1", "--max-tokens", "256",
                          "--model-timeout", "100",
                          "--out", str(workdir / "m.yaml"),
                          "--record", str(workdir / "c.json"))  # fmt: skip
        yield Calibrated(server, gguf, workdir, done)


def _compare(c: Calibrated, scenario: str, agents: tuple[str, ...], *more: str) -> str:
    db = c.workdir / f"{scenario}.db"
    done = _errorflow("run", scenario, "--trials", str(TRIALS), *c.model_sets(*agents),
                      "--set", "max_in_flight=1", "--model-timeout", "100",
                      "--compare-real", "--profile", str(c.profile), "-q", "--db", str(db),
                      *more)  # fmt: skip
    # --compare-real exits 1 (after its table) when a trial hit an infrastructure fault
    assert done.returncode == 0, (done.stderr, c.server.tail())
    with sqlite3.connect(db) as conn:
        real = conn.execute(
            "SELECT outcome FROM trials WHERE run_id LIKE '%-real'").fetchall()  # fmt: skip
    # the real model's trials are outcomes, scored: no infra fault, none timed out
    scored = {"success", "contained", "contaminated"}
    assert len(real) == TRIALS and {o for (o,) in real} <= scored, real
    return done.stdout


def _check_calibration(c: Calibrated) -> None:
    assert c.done.returncode == 0, (c.done.stderr, c.server.tail())
    found = json.loads(c.done.stdout)
    assert set(found) == MEASURED
    for est in found.values():
        assert est["probes"] + est["unclassified"] == PROBES
    # the writer families are answered within the timeout (their replies bounded by
    # max_tokens): each has a classified reply
    writer = MEASURED - {"p_self_retry_transient", "p_repair_with_options"}
    assert all(found[p]["probes"] >= 1 for p in writer), found
    profile = yaml.safe_load(c.profile.read_text())
    measured = [p["measured"] for p in profile["parameters"].values() if "measured" in p]
    assert measured and all(m["model"] == str(c.gguf) for m in measured)
    replay = _calibrate("--backend", f"replay:{c.workdir / 'c.json'}",
                        "--out", str(c.workdir / "r.yaml"))  # fmt: skip
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout) == found


def _check_contamination(c: Calibrated) -> None:
    out = _compare(c, "contamination", ("researcher", "writer"), "--json")
    rows = json.loads(out)["compare_real"]
    assert rows["outcome contaminated"]["n"] == TRIALS and "writer contaminated" in rows


#: A row of the printed table: measure, real %, simulated %, difference (interval), pairs.
ROW = re.compile(
    r"│ (?P<measure>[a-z ]+?) +│ +(?P<real>\d+)% │ +(?P<sim>\d+)% │ +(?P<diff>[+-]\d+)% "
    r"\((?P<low>[+-]\d+)% to (?P<high>[+-]\d+)%\) │ +(?P<a>\d+) vs (?P<b>\d+) of (?P<n>\d+) │"
)


def _check_chain(c: Calibrated) -> None:
    """The real model plays researcher, analyst and writer, at the default trial timeout
    (120 s): a chain of real replies one after another, each up to 100 s, fits in it, as
    the time at a model server does not count (errorflow/core/outside_time.py)."""
    agents = ("researcher", "analyst", "writer")
    out = _compare(c, "research-chain", agents)
    assert "Real model vs its simulation" in out and "real − simulated (95% CI)" in out
    rows = {m["measure"]: m for m in ROW.finditer(out)}
    outcomes = [f"outcome {o}" for o in ("success", "contained", "contaminated")]
    per_agent = [f"{a} {label}" for a in agents for label in ("contained", "contaminated")]
    assert set(rows) == {*outcomes, *per_agent}, out
    for name, row in rows.items():
        assert int(row["n"]) == TRIALS, name  # every trial paired: scored in both runs
        diff, low, high = int(row["diff"]), int(row["low"]), int(row["high"])
        assert low <= diff <= high, name
        assert abs(diff - (int(row["real"]) - int(row["sim"]))) <= 1, name  # rounded
    assert sum(int(rows[o]["real"]) for o in outcomes) in range(99, 102)
    assert "measured" in out  # the profile line: which parameters were measured


@pytest.mark.slow
@pytest.mark.llama
@pytest.mark.timeout(2400)
def test_calibrate_a_real_local_model_and_compare_it_with_its_simulation(
    tmp_path: Path,
) -> None:
    # one test, so that one pytest-xdist worker starts one server and calibrates once
    with _calibrated(tmp_path) as c:
        _check_calibration(c)
        _check_contamination(c)
        _check_chain(c)
