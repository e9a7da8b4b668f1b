"""Trials handed to `errorflow worker` processes through Mosquitto give what one process
gives; a worker killed mid-run has its batch run by another; nothing a client without
the run key publishes is taken for a result."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import aiomqtt
import pytest
from cryptography.exceptions import InvalidTag

from errorflow.bus.transport import InProcessBus
from errorflow.cli.main import main
from errorflow.protocol import signing
from errorflow.protocol.envelope import MAX_MESSAGE_BYTES
from errorflow.runtime import broker_workers, work_wire
from errorflow.runtime.broker_workers import Remote
from errorflow.runtime.runner import RunOptions, RunResult
from errorflow.runtime.workers import run as local_run
from errorflow.scenario.run_plan import RunPlan
from errorflow.scoring.score import Outcome, TrialScore
from tests.conftest import Mosquitto, scenario
from tests.test_liveness import cli, slow_file, wait_for_trials
from tests.test_workers import same_cli_runs

KEY = signing.new_key()


class Workers:
    """`errorflow worker` subprocesses, named, killed at the end whatever happened."""

    def __init__(self, url: str, run: str, names: list[str], tmp: Path) -> None:
        # TMPDIR: a killed worker cannot remove its scratch directory; the test's can go.
        env = {**os.environ, signing.KEY_ENV: KEY.hex(), "TMPDIR": str(tmp)}
        cmd = [sys.executable, "-m", "errorflow.cli.main", "worker", "--broker", url]
        self.procs = {
            n: subprocess.Popen([*cmd, "--run", run, "--name", n], env=env, stderr=subprocess.PIPE)
            for n in names
        }

    def kill(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGKILL)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


@pytest.fixture
def url(mosquitto: Mosquitto) -> str:
    return f"mqtt://127.0.0.1:{mosquitto.port}"


Start = Callable[[str, list[str]], Workers]


@pytest.fixture
def workers_of(url: str, tmp_path: Path) -> Iterator[Start]:
    started: list[Workers] = []

    def start(run: str, names: list[str]) -> Workers:
        started.append(Workers(url, run, names, tmp_path))
        return started[-1]

    yield start
    for w in started:
        w.stop()


def one_process(trials: int) -> RunResult:
    options = RunOptions(bus=InProcessBus())
    return asyncio.run(local_run(RunPlan.of(scenario("contamination"), trials=trials), options))


# -- the wire ------------------------------------------------------------------------------


def test_a_message_signed_with_another_key_or_unsigned_is_not_read() -> None:
    raw = work_wire.seal(KEY, {"t": "part", "run": "r"})
    assert work_wire.unseal(KEY, raw) == {"t": "part", "run": "r"}
    assert work_wire.unseal(signing.new_key(), raw) is None
    assert work_wire.unseal(KEY, b'{"t":"part","run":"r"}') is None
    assert work_wire.unseal(KEY, raw.replace(b'"r"', b'"x"')) is None


def test_the_scenario_travels_encrypted_and_comes_back_intact() -> None:
    text = scenario("contamination").model_dump_json().encode()
    boxed = work_wire.box(KEY, text)
    assert b"sk-live" in text and b"sk-live" not in json.dumps(boxed).encode()
    assert work_wire.unbox(KEY, boxed) == text
    with pytest.raises(InvalidTag):  # another run's key, or a changed byte, opens nothing
        work_wire.unbox(signing.new_key(), boxed)
    changed = {
        **boxed,
        "data": boxed["data"][:-4] + ("AAAA" if boxed["data"][-4:] != "AAAA" else "BBBB"),
    }
    with pytest.raises(InvalidTag):
        work_wire.unbox(KEY, changed)


def test_results_are_cut_under_the_message_limit_and_joined_again() -> None:
    blob = work_wire.pack({"scores": []}, os.urandom(3 * work_wire.PART_BYTES + 7))
    parts = list(work_wire.parts_of(blob, {"run": "r", "batch": 0}))
    assert len(parts) == 4
    assert all(len(work_wire.seal(KEY, p)) < MAX_MESSAGE_BYTES for p in parts)
    by_index = {p["i"]: p for p in parts}
    assert work_wire.joined({0: by_index[0]}) is None  # not complete yet
    assert work_wire.joined(by_index) == blob
    assert work_wire.unpack(blob)[0] == {"scores": []}


def test_a_score_survives_the_wire() -> None:
    one = one_process(2)
    for s in one.scores:
        assert work_wire.score_of(json.loads(json.dumps(work_wire.score_doc(s)))) == s


def test_batches_are_contiguous_and_cover_every_trial() -> None:
    assert broker_workers.batches_of([0, 1, 2, 4, 5], 2) == [(0, 1), (2, 4), (5,)]
    assert broker_workers.batch_size(20_000, 4) == 500
    assert broker_workers.batch_size(2000, 4) == 125
    assert broker_workers.batch_size(400, 4) == 50
    assert broker_workers.batch_size(3, 4) == 3


# -- on Mosquitto --------------------------------------------------------------------------


def test_two_workers_give_the_run_one_process_gives(
    tmp_path: Path, url: str, workers_of: Start, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = tmp_path / "run.key"
    signing.write_key_file(key_file, KEY)
    workers_of("rb", ["a", "b"])
    docs = same_cli_runs(
        tmp_path, capsys, "--broker", url, "--remote-workers", "2", "--run-id", "rb",
        "--key-file", str(key_file), "--batch-trials", "4",
    )  # fmt: skip
    assert docs[1]["broker"].endswith("errorflow workers")


def test_a_killed_workers_batch_is_run_by_the_other(
    tmp_path: Path, mosquitto: Mosquitto, workers_of: Start
) -> None:
    crew = workers_of("rk", ["a", "b"])
    taken: list[tuple[int, str]] = []

    def on_taken(batch: int, worker: str) -> None:
        if worker == "a" and batch > 0 and not any(w == "a" and b > 0 for b, w in taken):
            crew.kill("a")  # mid-batch: it has just started it
        taken.append((batch, worker))

    remote = Remote(mosquitto.url, ready=2, batch_trials=5, on_taken=on_taken)
    options = RunOptions(db_path=tmp_path / "k.db", run_id="rk", run_key=KEY)
    plan = RunPlan.of(scenario("contamination"), trials=30)
    got = asyncio.run(broker_workers.run(plan, options, remote))
    one = one_process(30)
    killed = next(b for b, w in taken if w == "a" and b > 0)
    assert (killed, "b") in taken  # handed to the other
    assert [s.outcome for s in got.scores] == [s.outcome for s in one.scores]
    assert got.summary == one.summary
    assert [s.trial for s in got.scores] == list(range(30))


def test_a_forged_result_from_a_client_without_the_key_is_rejected(
    tmp_path: Path, mosquitto: Mosquitto, workers_of: Start
) -> None:
    workers_of("rf", ["a"])
    forger = signing.new_key()
    sent: list[asyncio.Task[None]] = []

    async def forge() -> None:
        # Every trial contaminated, claimed for batch 0: a result nobody ran.
        lies = [work_wire.score_doc(TrialScore(t, Outcome.CONTAMINATED, 9)) for t in (0, 1)]
        meta: work_wire.Doc = {
            "scores": lies,
            "rejects": {},
            "error": None,
            "extra": [],
            "fault_counts": {},
        }
        head = {"run": "rf", "batch": 0, "attempt": "x", "worker": "a"}
        async with aiomqtt.Client("127.0.0.1", mosquitto.port) as client:
            for part in work_wire.parts_of(work_wire.pack(meta, b""), head):
                topic = work_wire.run_topic(KEY, "rf", "parts")
                await client.publish(topic, work_wire.seal(forger, part), qos=1)
                await client.publish(topic, json.dumps(part).encode(), qos=1)  # unsigned

    def on_taken(batch: int, worker: str) -> None:
        if not sent:
            sent.append(asyncio.get_running_loop().create_task(forge()))

    remote = Remote(mosquitto.url, ready=1, batch_trials=2, on_taken=on_taken)
    options = RunOptions(db_path=tmp_path / "f.db", run_id="rf", run_key=KEY)
    plan = RunPlan.of(scenario("contamination"), trials=12)
    got = asyncio.run(broker_workers.run(plan, options, remote))
    one = one_process(12)
    assert got.rejects.get(broker_workers.FORGED, 0) >= 2
    assert [s.outcome for s in got.scores] == [s.outcome for s in one.scores]


def test_a_run_scoped_scenario_is_refused_with_the_reason(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "x.db"
    args = ["run", "outage", "--trials", "3", "--broker", url, "--remote-workers", "2"]
    assert main([*args, "--db", str(db), "-q"]) == 2
    err = capsys.readouterr().err
    assert "cannot be handed to workers" in err and "one process" in err
    assert not db.exists()


def test_no_worker_in_time_fails_before_anything_is_stored(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    remote = Remote(mosquitto.url, ready=1, wait_s=0.5)
    options = RunOptions(db_path=tmp_path / "n.db", run_id="rn", run_key=KEY)
    plan = RunPlan.of(scenario("contamination"), trials=3)
    with pytest.raises(broker_workers.NoWorkers, match="errorflow worker"):
        asyncio.run(broker_workers.run(plan, options, remote))
    assert not (tmp_path / "n.db").exists()


def test_remote_workers_need_a_broker_and_a_run_key_given_out_of_band(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(signing.KEY_ENV, raising=False)
    db = str(tmp_path / "x.db")
    assert main(["run", "contamination", "--remote-workers", "2", "--db", db, "-q"]) == 2
    assert "expected --broker URL" in capsys.readouterr().err
    args = ["run", "contamination", "--broker", url, "--remote-workers", "2", "--db", db, "-q"]
    assert main(args) == 2
    assert "the workers need the run key" in capsys.readouterr().err
    assert main(["worker", "--broker", url]) == 2
    assert "the run key is needed" in capsys.readouterr().err
    assert not Path(db).exists()


@pytest.mark.slow
def test_workers_of_a_run_leave_when_its_runner_is_killed(
    tmp_path: Path, url: str, workers_of: Start
) -> None:
    """The run's `end` is the runner's last will: a runner killed with SIGKILL cannot say
    it, the broker does, and the run's workers leave once their batch is over."""
    key_file, db = tmp_path / "run.key", tmp_path / "o.db"
    signing.write_key_file(key_file, KEY)
    crew = workers_of("ro", ["a"])
    run = subprocess.Popen(
        [
            *cli("run", str(slow_file(tmp_path, trials=400)), "--broker", url, "--run-id", "ro"),
            *("--remote-workers", "1", "--batch-trials", "5", "--key-file", str(key_file)),
            *("--db", str(db), "-q"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_trials(db, 5, run)  # a batch merged: the worker is on the next one
        run.send_signal(signal.SIGKILL)
        worker = crew.procs["a"]
        _, stderr = worker.communicate(timeout=10)
    finally:
        if run.poll() is None:
            run.kill()
    assert worker.returncode == 0 and "run ro is over" in stderr.decode(), stderr
