"""The runner's last will and heartbeat: control envelopes of the runner like any other,
signed with the run key, numbered from its endpoint, naming its session."""

from __future__ import annotations

import asyncio

from errorflow.bus.endpoint import Endpoint
from errorflow.bus.transport import InProcessBus
from errorflow.protocol import signing, topics
from errorflow.protocol.control import Alive, Gone, parse_control
from errorflow.runtime.runner_presence import RunnerPresence, runner_endpoint

KEY = signing.new_key()


async def test_the_will_is_a_signed_gone_of_the_runners_session() -> None:
    bus = InProcessBus()
    ep, presence = await runner_endpoint(
        bus, "runner", lambda c: Endpoint(c, "r1", topics.RUNNER, key=KEY)
    )
    first = ep.seq
    topic, raw = presence.will()
    assert topic == topics.control("r1", topics.RUNNER)
    assert ep.seq == first + 1  # a seq of its own: no message of the runner's repeats it
    agent = Endpoint(await bus.connect("a"), "r1", "writer", {topics.RUNNER}, key=KEY)
    env = agent.check(topic, raw)
    assert env is not None and env.sender == topics.RUNNER and env.seq == first
    assert parse_control(env.payload) == Gone(agent=topics.RUNNER, session=presence.session)
    outsider = Endpoint(await bus.connect("o"), "r1", "writer", {topics.RUNNER}, key=b"x" * 32)
    assert outsider.check(topic, raw) is None and outsider.rejects == {"bad_signature": 1}


async def test_the_heartbeat_says_alive_until_stopped() -> None:
    bus = InProcessBus()
    listener = await bus.connect("listener")
    await listener.subscribe(topics.control("r1", topics.RUNNER))
    ep = Endpoint(await bus.connect("runner"), "r1", topics.RUNNER, key=KEY)
    presence = RunnerPresence(ep)
    presence.start_heartbeat(0.01)
    await asyncio.sleep(0.1)
    await presence.stop_heartbeat()
    beats = listener.queue.qsize()
    assert beats >= 3
    await asyncio.sleep(0.05)
    assert listener.queue.qsize() == beats
    agent = Endpoint(await bus.connect("a"), "r1", "writer", {topics.RUNNER}, key=KEY)
    topic, raw = listener.queue.get_nowait()
    env = agent.check(topic, raw)
    assert env is not None
    assert parse_control(env.payload) == Alive(agent=topics.RUNNER, session=presence.session)
