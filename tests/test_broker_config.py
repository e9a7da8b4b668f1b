"""`errorflow broker-config`: users, ACLs and passwords for Mosquitto, and a real
Mosquitto enforcing them on single clients and on a run of separate agent processes."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import shutil
import sqlite3
import stat
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from aiomqtt.exceptions import MqttConnectError

from errorflow.bus.endpoint import Endpoint
from errorflow.bus.mqtt import MqttBus, MqttConnection
from errorflow.bus.url import PASSWORD_ENV, USER_ENV, BrokerURL
from errorflow.cli import main as cli_main
from errorflow.protocol import signing, topics
from errorflow.protocol.control import Stop
from errorflow.protocol.envelope import Kind
from errorflow.protocol.events import TrialOutcomeEvent
from errorflow.runtime.broker_config import (
    BrokerConfigError,
    BrokerFiles,
    BrokerUser,
    acl_text,
    broker_users,
    password_line,
    password_matches,
    write_broker_config,
)
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.scenario.bundled import bundled
from errorflow.scenario.spec.model import Scenario
from tests.conftest import Mosquitto, free_port, scenario
from tests.test_agent_process import run_with_processes
from tests.test_agent_process import spawn_agent as spawn_process
from tests.test_runner import normalised


def fan_in() -> Scenario:
    """Two researchers -> writer -> reviewer, which may return work to the writer."""
    base = scenario("contamination").model_dump()
    researcher = base["agents"]["researcher"]
    agents = {
        "r1": researcher,
        "r2": researcher,
        "writer": {**base["agents"]["writer"], "sends_to": ["reviewer"]},
        "reviewer": {**base["agents"]["writer"], "role": "reviewer", "returns_to": "writer"},
    }
    return Scenario.model_validate({**base, "agents": agents})


CHAIN_ACL = """\
# errorflow broker-config: scenario contamination, run r1

user researcher
topic write errorflow/r1/inbox/writer
topic write errorflow/r1/events/researcher
topic write errorflow/r1/control/researcher
topic write errorflow/r1/ack/runner
topic read errorflow/r1/inbox/researcher
topic read errorflow/r1/control/runner
topic read errorflow/r1/ack/researcher

user writer
topic write errorflow/r1/inbox/runner
topic write errorflow/r1/events/writer
topic write errorflow/r1/control/writer
topic write errorflow/r1/ack/researcher
topic read errorflow/r1/inbox/writer
topic read errorflow/r1/control/runner
topic read errorflow/r1/ack/writer

user runner
topic write errorflow/r1/inbox/researcher
topic write errorflow/r1/inbox/writer
topic write errorflow/r1/events/runner
topic write errorflow/r1/control/runner
topic write errorflow/r1/ack/writer
topic read errorflow/r1/#

user observer
topic read errorflow/r1/#
"""


def test_the_acl_of_a_chain() -> None:
    users = broker_users(scenario("contamination"), "r1")
    header = "errorflow broker-config: scenario contamination, run r1"
    assert acl_text(users, header) == CHAIN_ACL


def _reads(agent: str, run: str = "f") -> tuple[str, ...]:
    return (
        f"errorflow/{run}/inbox/{agent}",
        f"errorflow/{run}/control/runner",
        f"errorflow/{run}/ack/{agent}",
    )


def test_the_acl_of_a_manager_and_its_delegates() -> None:
    users = {u.name: u for u in broker_users(scenario("manager-workers"), "m")}
    t = "errorflow/m/"
    assert users["lead"] == BrokerUser(
        "lead",
        (
            t + "inbox/runner",
            t + "inbox/sales",  # the sub-tasks
            t + "inbox/cities",
            t + "inbox/fx",
            t + "events/lead",
            t + "control/lead",
            t + "ack/runner",
            t + "ack/sales",  # their results: the lead acks them
            t + "ack/cities",
            t + "ack/fx",
        ),
        _reads("lead", "m"),
    )
    assert users["fx"] == BrokerUser(
        "fx",
        (t + "inbox/lead", t + "events/fx", t + "control/fx", t + "ack/lead"),
        _reads("fx", "m"),
    )


def test_the_acl_of_a_fan_in_with_a_reviewer_that_returns_work() -> None:
    users = {u.name: u for u in broker_users(fan_in(), "f")}
    t = "errorflow/f/"
    assert list(users) == ["r1", "r2", "writer", "reviewer", "runner", "observer"]
    for r in ("r1", "r2"):
        assert users[r] == BrokerUser(
            r,
            (t + "inbox/writer", t + f"events/{r}", t + f"control/{r}", t + "ack/runner"),
            _reads(r),
        )
    assert users["writer"] == BrokerUser(
        "writer",
        (
            t + "inbox/reviewer",
            t + "events/writer",
            t + "control/writer",
            t + "ack/r1",
            t + "ack/r2",
            t + "ack/reviewer",  # the reviewer sends work back: the writer acks it
        ),
        _reads("writer"),
    )
    assert users["reviewer"] == BrokerUser(
        "reviewer",
        (
            t + "inbox/runner",
            t + "inbox/writer",  # returns_to
            t + "events/reviewer",
            t + "control/reviewer",
            t + "ack/writer",
        ),
        _reads("reviewer"),
    )
    assert users["runner"] == BrokerUser(
        "runner",
        (
            t + "inbox/r1",
            t + "inbox/r2",
            t + "inbox/writer",
            t + "inbox/reviewer",
            t + "events/runner",
            t + "control/runner",
            t + "ack/reviewer",
        ),
        (t + "#",),
    )
    assert users["observer"] == BrokerUser("observer", (), (t + "#",))


def test_the_acl_of_a_discussion_goes_both_ways_and_only_deciders_answer() -> None:
    users = {u.name: u for u in broker_users(scenario("netsafe-topologies"), "d")}
    t = "errorflow/d/"
    n1, n2 = set(users["n1"].writes), set(users["n2"].writes)
    assert {t + "inbox/n2", t + "inbox/runner", t + "ack/n2"} <= n1  # n1 decides
    assert {t + "inbox/n1", t + "inbox/n3", t + "ack/n1", t + "ack/n3"} <= n2
    assert t + "inbox/runner" not in n2 and t + "inbox/n4" not in n2


@pytest.mark.parametrize("run_id", ["a/b", "a+", "#", "a b", "x\n", "", "r" * 65])
def test_a_run_id_that_is_not_one_topic_level_is_refused(run_id: str) -> None:
    with pytest.raises(BrokerConfigError, match="one topic level"):
        broker_users(scenario("contamination"), run_id)


def test_an_agent_named_like_the_observer_is_refused() -> None:
    base = scenario("contamination").model_dump()
    base["agents"]["observer"] = base["agents"].pop("writer")
    base["agents"]["researcher"]["sends_to"] = ["observer"]
    with pytest.raises(BrokerConfigError, match="observer"):
        broker_users(Scenario.model_validate(base), "r1")


def test_a_password_line_is_mosquittos_pbkdf2_sha512_format() -> None:
    line = password_line("writer", "pw-1", salt=b"0123456789ab", iterations=1000)
    user, _, hashed = line.partition(":")
    empty, seven, iterations, salt, key = hashed.split("$")
    assert (user, empty, seven, iterations) == ("writer", "", "7", "1000")
    assert base64.b64decode(salt) == b"0123456789ab"
    expected = hashlib.pbkdf2_hmac("sha512", b"pw-1", b"0123456789ab", 1000, 64)
    assert base64.b64decode(key) == expected
    assert password_matches(line, "pw-1") and not password_matches(line, "pw-2")
    fresh = password_line("writer", "pw-1")
    assert fresh != password_line("writer", "pw-1")  # a new salt every time
    assert fresh.split("$")[2] == "20000" and password_matches(fresh, "pw-1")


def env_of(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_the_files_written_and_who_may_read_them(tmp_path: Path) -> None:
    files = write_broker_config(scenario("contamination"), "r1", tmp_path / "cfg", port=1884)
    mode = {p.name: stat.S_IMODE(p.stat().st_mode) for p in files.directory.iterdir()}
    assert mode == {
        "mosquitto.conf": 0o644,
        "acl": 0o644,
        "passwd": 0o640,
        "run.key": 0o600,
        "researcher.env": 0o600,
        "writer.env": 0o600,
        "runner.env": 0o600,
        "observer.env": 0o600,
    }
    assert stat.S_IMODE(files.directory.stat().st_mode) == 0o755
    conf = files.conf.read_text().splitlines()
    assert conf[1:] == [
        "listener 1884 127.0.0.1",
        "allow_anonymous false",
        f"password_file {files.passwd}",
        f"acl_file {files.acl}",
        "persistence false",
        "set_tcp_nodelay true",
        "max_queued_messages 100000",
    ]
    key = signing.read_key_file(files.run_key)
    lines = dict(line.split(":", 1) for line in files.passwd.read_text().splitlines())
    assert set(lines) == {"researcher", "writer", "runner", "observer"}
    for name, path in files.env_files.items():
        env = env_of(path)
        assert env[USER_ENV] == name
        assert password_matches(f"{name}:{lines[name]}", env[PASSWORD_ENV])
        assert env[PASSWORD_ENV] not in files.passwd.read_text()
        if name == "observer":
            assert signing.KEY_ENV not in env  # it reads only: no key to sign with
        else:
            assert signing.key_from_text(env[signing.KEY_ENV]) == key
    passwords = {env_of(p)[PASSWORD_ENV] for p in files.env_files.values()}
    assert len(passwords) == 4


def test_a_directory_in_use_is_refused_unless_forced(tmp_path: Path) -> None:
    s = scenario("contamination")
    first = write_broker_config(s, "r1", tmp_path)
    old = env_of(first.env_files["writer"])
    with pytest.raises(BrokerConfigError, match="not empty"):
        write_broker_config(s, "r2", tmp_path)
    assert env_of(first.env_files["writer"]) == old
    (tmp_path / "writer.env").chmod(0o644)
    again = write_broker_config(s, "r2", tmp_path, force=True)
    assert env_of(again.env_files["writer"]) != old
    assert stat.S_IMODE((tmp_path / "writer.env").stat().st_mode) == 0o600
    assert "errorflow/r2/inbox/runner" in again.acl.read_text()
    with pytest.raises(BrokerConfigError, match="expected a directory"):
        write_broker_config(s, "r1", again.conf)


def test_the_command_prints_the_files_and_how_to_start_everyone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "cfg"
    code = cli_main.main(
        ["broker-config", "contamination", "--run-id", "demo", "--dir", str(d), "--port", "1999"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert f"mosquitto -c {d}/mosquitto.conf" in out
    assert f". {d}/writer.env; exec errorflow agent contamination --name writer " in out
    assert "--broker mqtt://127.0.0.1:1999 --run demo" in out
    assert "--external-agents --run-id demo" in out
    for path in d.glob("*.env"):
        assert env_of(path)[PASSWORD_ENV] not in out
    assert signing.key_to_text(signing.read_key_file(d / "run.key")) not in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--run-id", "a/b"], "--run-id a/b: expected 1 to 64 letters"),
        (["--port", "0"], "expected a port from 1 to 65535"),
        (["--host", "a b"], "--host a b: expected a host name"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    code = cli_main.main(["broker-config", "contamination", "--dir", str(tmp_path / "d"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "d").exists()


def test_an_existing_directory_with_files_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    code = cli_main.main(["broker-config", "contamination", "--dir", str(tmp_path)])
    assert code == 2 and "--force" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


# -- a real Mosquitto with the generated configuration ----------------------------------


@dataclass
class LeastPrivilegeBroker:
    files: BrokerFiles
    mosquitto: Mosquitto
    run_id: str

    def url(self, user: str | None) -> BrokerURL:
        port = self.mosquitto.port
        if user is None:
            return BrokerURL("127.0.0.1", port)
        env = env_of(self.files.env_files[user])
        return BrokerURL("127.0.0.1", port, username=env[USER_ENV], password=env[PASSWORD_ENV])

    def env(self, user: str) -> dict[str, str]:
        """The environment of a participant's process: ours minus any errorflow
        credential, plus its env file."""
        base = {k: v for k, v in os.environ.items() if not k.startswith("ERRORFLOW_")}
        return {**base, **env_of(self.files.env_files[user])}

    def denied_publishes(self) -> int:
        self.mosquitto.stop()
        return self.mosquitto.log.read_text(errors="replace").count("Denied PUBLISH")


@contextlib.contextmanager
def least_privilege_broker(
    s: Scenario, run_id: str, log_all: bool = False
) -> Iterator[LeastPrivilegeBroker]:
    # Under /tmp, not pytest's tmp_path: Mosquitto started as root reads the password
    # and ACL files as user `mosquitto`, which cannot enter pytest's 0700 directories.
    base = Path(tempfile.mkdtemp(prefix="errorflow-acl-"))
    base.chmod(0o755)
    try:
        port = free_port()
        files = write_broker_config(s, run_id, base / "broker", port=port)
        extra = files.conf.read_text() + ("log_type all\n" if log_all else "")
        mosquitto = Mosquitto(base, extra_config=extra, port=port)
        mosquitto.start()
        try:
            yield LeastPrivilegeBroker(files, mosquitto, run_id)
        finally:
            mosquitto.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def _connects(url: BrokerURL) -> bool:
    try:
        async with aiomqtt.Client(
            url.host, url.port, username=url.username, password=url.password, timeout=5
        ):
            return True
    except MqttConnectError:
        return False


@contextlib.asynccontextmanager
async def session(url: BrokerURL, name: str) -> AsyncIterator[MqttConnection]:
    bus = MqttBus(url)
    try:
        yield await bus.connect(name)
    finally:
        await bus.close()


async def _drain(conn: MqttConnection, until: int) -> list[tuple[str, bytes]]:
    got: list[tuple[str, bytes]] = []
    while len(got) < until:
        item = await asyncio.wait_for(conn.queue.get(), 5)
        assert item is not None
        got.append(item)
    return got


@pytest.mark.mosquitto
async def test_mosquitto_lets_each_participant_in_with_its_own_password_only() -> None:
    with least_privilege_broker(scenario("contamination"), "acl-1") as lp:
        for user in ("researcher", "writer", "runner", "observer"):
            assert await _connects(lp.url(user)), user
        assert not await _connects(lp.url(None))  # anonymous
        writer = lp.url("writer")
        assert not await _connects(BrokerURL(writer.host, writer.port, "writer", "wrong"))
        stolen = lp.url("researcher").password
        assert not await _connects(BrokerURL(writer.host, writer.port, "writer", stolen))


@pytest.mark.mosquitto
async def test_a_publish_outside_the_acl_is_never_delivered() -> None:
    t = "errorflow/acl-2/"
    with least_privilege_broker(scenario("contamination"), "acl-2", log_all=True) as lp:
        async with (
            session(lp.url("observer"), "observer") as observer,
            session(lp.url("researcher"), "spy") as spy,
            session(lp.url("writer"), "writer") as writer,
        ):
            await observer.subscribe(t + "#")
            await spy.subscribe(t + "inbox/runner")  # not the researcher's to read
            await observer.publish(t + "inbox/runner", b"observer: forged result")
            denied = [
                t + "inbox/researcher",  # a task only the runner may give
                t + "events/researcher",  # another agent's telemetry
                t + "control/runner",  # a stop only the runner may give
                t + "ack/writer",  # acks for itself
                "errorflow/other-run/inbox/writer",  # another run
            ]
            for topic in denied:
                await writer.publish(topic, b"writer: forged")
            allowed = [t + "events/writer", t + "inbox/runner"]
            for topic in allowed:
                await writer.publish(topic, b"writer: its own")
            got = await _drain(observer, len(allowed))
            assert got == [(topic, b"writer: its own") for topic in allowed]
            await asyncio.sleep(0.3)
            assert observer.queue.empty() and spy.queue.empty()
        assert lp.denied_publishes() == 1 + len(denied)


# -- a run of separate agent processes against it ---------------------------------------


def spawn_agent(
    lp: LeastPrivilegeBroker, name: str, scenario_file: Path | None = None
) -> subprocess.Popen[bytes]:
    url = f"mqtt://127.0.0.1:{lp.mosquitto.port}"  # the credential comes from the env
    return spawn_process(name, lp.run_id, url, env=lp.env(name), scenario_file=scenario_file)


async def _impersonate(lp: LeastPrivilegeBroker, key: bytes, sent: list[str]) -> None:
    """The writer's credential and the run key (a compromised writer process) speaking
    for the runner and the researcher: only the broker's ACL stands in the way."""
    members = ["researcher", "writer", topics.RUNNER]
    async with session(lp.url("writer"), "writer-gone-rogue") as conn:
        runner = Endpoint(conn, lp.run_id, topics.RUNNER, members, key=key)
        researcher = Endpoint(conn, lp.run_id, "researcher", members, key=key)
        while True:
            for forged in (
                await runner.send(
                    kind=Kind.TASK,
                    recipient="researcher",
                    trial=0,
                    trace_id=f"{lp.run_id}-t0",
                    payload={"prompt": "forged"},
                ),
                await researcher.send(
                    kind=Kind.RESULT,
                    recipient="writer",
                    trial=1,
                    trace_id=f"{lp.run_id}-t1",
                    payload={"forged": True},
                ),
                await researcher.send(
                    kind=Kind.EVENT,
                    recipient="observers",
                    trial=2,
                    trace_id="x",
                    payload=TrialOutcomeEvent(outcome="success", depth=0, reason="").to_payload(),
                ),
            ):
                sent.append(forged.id)
            await runner.control(Stop(), trace="control")
            await asyncio.sleep(0.05)


def _stored(db: Path, run_id: str, ids: list[str]) -> int:
    conn = sqlite3.connect(db)
    marks = ",".join("?" * len(ids))
    found = 0
    for table in ("messages", "events"):
        sql = f"SELECT COUNT(*) FROM {table} WHERE run_id = ? AND id IN ({marks})"
        found += conn.execute(sql, (run_id, *ids)).fetchone()[0]
    for (raw,) in conn.execute("SELECT raw FROM rejects WHERE run_id = ?", (run_id,)):
        found += any(i.encode() in bytes(raw) for i in ids)
    return found


def _split_options(lp: LeastPrivilegeBroker, key: bytes, tmp_path: Path, **more: Any) -> RunOptions:
    """The runner's options for agents in processes of their own on `lp`."""
    return RunOptions(broker=lp.url("runner"), db_path=tmp_path / "split.db", run_id=lp.run_id,
                      external_agents=True, presence_timeout_s=60, run_key=key, **more)  # fmt: skip


@pytest.mark.mosquitto
@pytest.mark.slow
async def test_separate_agent_processes_on_the_least_privilege_broker(tmp_path: Path) -> None:
    s = scenario("contamination", trials=8)
    with least_privilege_broker(s, "lp-run-1") as lp:
        key = signing.read_key_file(lp.files.run_key)
        procs = [spawn_agent(lp, name) for name in ("researcher", "writer")]
        forged: list[str] = []
        rogue = asyncio.create_task(_impersonate(lp, key, forged))
        try:
            split = await run_with_processes(procs, s, _split_options(lp, key, tmp_path))
        finally:
            rogue.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await rogue
    assert len(forged) > 30  # it kept trying during the whole run
    assert _stored(tmp_path / "split.db", lp.run_id, forged) == 0
    single = await run_scenario(s, RunOptions(db_path=tmp_path / "single.db"))
    assert [x.outcome for x in split.scores] == [x.outcome for x in single.scores]
    assert normalised(split) == normalised(single)


@pytest.mark.mosquitto
async def test_a_discussion_runs_on_the_config_it_was_given(tmp_path: Path) -> None:
    """Its members, each a process of its own on the least-privilege broker, give the
    outcomes one process gives."""
    s = scenario("netsafe-topologies", trials=3)
    with least_privilege_broker(s, "lp-talk-1") as lp:
        key = signing.read_key_file(lp.files.run_key)
        procs = [spawn_agent(lp, name, bundled()["netsafe-topologies"]) for name in s.agents]
        options = _split_options(lp, key, tmp_path, trial_timeout_s=30)
        split = await run_with_processes(procs, s, options)
    single = await run_scenario(s, RunOptions(db_path=tmp_path / "single.db"))
    assert [x.outcome for x in split.scores] == [x.outcome for x in single.scores]
    assert split.outcomes["bus_fault"] == 0
