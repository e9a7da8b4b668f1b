"""The embedded broker lets in only the run's own participants, on loopback only."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from pathlib import Path

import aiomqtt
import pytest
from aiomqtt.exceptions import MqttConnectError

from errorflow.bus.broker import Credential, EmbeddedBroker
from errorflow.bus.mqtt import MqttBus
from errorflow.bus.url import BrokerURL
from errorflow.runtime.runner import RunOptions, run_scenario
from tests.conftest import scenario


async def _connects(url: BrokerURL, username: str | None, password: str | None) -> bool:
    try:
        async with aiomqtt.Client(
            url.host,
            url.port,
            username=username,
            password=password,
            protocol=aiomqtt.ProtocolVersion.V311,
            timeout=5,
        ):
            return True
    except MqttConnectError as exc:
        assert exc.rc == 135  # MQTT 3.1.1 CONNACK 5, "not authorized"
        return False


async def test_only_the_runs_credential_gets_in(embedded: BrokerURL) -> None:
    assert embedded.username and embedded.password
    assert await _connects(embedded, embedded.username, embedded.password)
    assert not await _connects(embedded, None, None)  # anonymous
    assert not await _connects(embedded, embedded.username, "wrong")
    assert not await _connects(embedded, embedded.username, "")
    assert not await _connects(embedded, "someone", embedded.password)


async def test_two_brokers_have_different_credentials() -> None:
    async with EmbeddedBroker() as first, EmbeddedBroker() as second:
        assert first.password != second.password
        assert not await _connects(second, first.username, first.password)
        assert await _connects(second, second.username, second.password)


async def test_a_given_credential_is_the_one_accepted() -> None:
    credential = Credential("run-7", "s3cret-pass")
    async with EmbeddedBroker(credential=credential) as url:
        assert (url.username, url.password) == ("run-7", "s3cret-pass")
        assert await _connects(url, "run-7", "s3cret-pass")
        assert not await _connects(url, "run-7", "s3cret-pas")


async def test_the_url_carries_the_credential_and_never_shows_the_password() -> None:
    broker = EmbeddedBroker()
    url = await broker.start()
    try:
        assert url.host == "127.0.0.1" and url.port == broker.port
        secret = broker.credential.password
        for shown in (str(url), repr(url), repr(broker.credential)):
            assert secret not in shown
        assert str(url) == f"mqtt://{url.username}:***@127.0.0.1:{url.port}"
    finally:
        await broker.stop()


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "example.org", ""])
def test_it_listens_on_loopback_only(host: str) -> None:
    with pytest.raises(ValueError, match="loopback"):
        EmbeddedBroker(host)


async def test_a_client_without_the_credential_cannot_knock_a_participant_off(
    embedded: BrokerURL,
) -> None:
    # amqtt drops a session whose client id another client connects with, before it
    # checks that client's credential: participant ids carry a random suffix.
    bus = MqttBus(embedded)
    try:
        writer = await bus.connect("run-1-writer")
        assert writer.client_id.startswith("run-1-writer-")
        assert len(writer.client_id) > len("run-1-writer-") + 8
        await writer.subscribe("errorflow/run-1/inbox/writer")
        for guess in ("run-1-writer", writer.client_id[:-1]):
            with pytest.raises(MqttConnectError):
                async with aiomqtt.Client(
                    embedded.host, embedded.port, identifier=guess, password="x", username="x"
                ):
                    pass
        sender = await bus.connect("run-1-researcher")
        await sender.publish("errorflow/run-1/inbox/writer", b"still here")
        _topic, payload = await asyncio.wait_for(anext(aiter(writer.messages())), 5)
        assert payload == b"still here" and writer.reconnects == 0
    finally:
        await bus.close()


async def test_a_run_on_the_embedded_broker_still_works(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    s = scenario("contamination", trials=4)
    options = RunOptions(db_path=db, embedded_broker=True)  # starts its own broker
    result = await run_scenario(s, options)
    assert len(result.scores) == 4
    assert result.broker.startswith("embedded amqtt at mqtt://errorflow:***@127.0.0.1:")
    again = await run_scenario(s, RunOptions(db_path=tmp_path / "again.db"))
    assert again.broker == "in-process"  # no broker given, nobody outside: none started
    assert [x.outcome for x in result.scores] == [x.outcome for x in again.scores]


async def test_a_run_on_a_given_embedded_url_uses_its_credential(
    embedded: BrokerURL, tmp_path: Path
) -> None:
    s = scenario("contamination", trials=2)
    db = tmp_path / "a.db"
    result = await run_scenario(s, RunOptions(broker=embedded, db_path=db))
    assert len(result.scores) == 2
    assert embedded.password and embedded.password.encode() not in db.read_bytes()
    stored = sqlite3.connect(db).execute("SELECT broker FROM runs").fetchone()[0]
    assert stored == str(embedded)
    anonymous = dataclasses.replace(embedded, username=None, password=None)
    with pytest.raises(ConnectionError, match="cannot connect"):
        await run_scenario(s, RunOptions(broker=anonymous, db_path=tmp_path / "b.db"))
