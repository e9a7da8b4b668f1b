"""Bus overhead: errorflow's envelope path against the raw MQTT client, same broker, run.

Both client libraries errorflow can use (issue #19): aiomqtt (`bus.mqtt.MqttConnection`)
and gmqtt (`bus.gmqtt_transport.GmqttConnection`), each against its own raw client.
The raw gmqtt path publishes a window of messages and then waits until gmqtt's own
QoS 1 storage is empty (every PUBACK in), the nearest gmqtt has to awaited publishes.

errorflow path, per message: build an `Envelope` (pydantic validation), `encode()`,
`MqttConnection.publish` (QoS 1), the connection's reader task and queue, then
`Endpoint.check` (decode: json + pydantic validation, run/sender/duplicate checks and
the HMAC-SHA256 signature every run's envelopes carry: `encode(KEY)` / `key=KEY`).
raw path: `aiomqtt.Client.publish` of ready bytes of the same size (QoS 1) and
`async for message in client.messages` on a second client.

Both raw clients set TCP_NODELAY, as errorflow's `MqttConnection` does (`_no_delay`),
so the ratio is not the socket option.

Both paths run in this process on one event loop (as in `errorflow run`), one publisher
client and one subscriber client, against the embedded amqtt broker and against a
Mosquitto subprocess, in alternating rounds; the figure is the median of the per-round
ratios errorflow/raw of the time to move N messages. Two load shapes: a window of 32
publishes in flight (throughput, as the runner and agents publish concurrently) and
one at a time (latency). Target: errorflow/raw <= 1.15x, judged per client. A fourth
path, `unsigned`, is the envelope path without the run key: signed/unsigned is what the
HMAC-SHA256 signing and verifying (#21) cost on the wire path.

A third path, `acked`, is what a task/result message costs in a run since end-to-end
acks: `Endpoint.send` (pending until acked) to `Endpoint.receive`, which answers each
message with an `ack` control message that the sender's `Endpoint.receive` consumes;
timed until the last message arrived and every ack was back. It is printed next to the
target, not judged against it (it moves two messages per message).

    python bench/bench_bus_overhead.py [--quick]
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
import uuid
from typing import Any

import aiomqtt
import gmqtt  # type: ignore[import-untyped]
from _util import broker, no_delay, parse_args, row, run, verdict
from gmqtt.mqtt.constants import MQTTv311  # type: ignore[import-untyped]
from gmqtt.storage import PersistentStorage  # type: ignore[import-untyped]

from errorflow.bus.endpoint import Endpoint
from errorflow.bus.gmqtt_transport import GmqttConnection
from errorflow.bus.mqtt import MqttConnection
from errorflow.bus.url import BrokerURL
from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol import signing, topics
from errorflow.protocol.envelope import (
    Envelope,
    Kind,
    Status,
    WireError,
    decode,
)

TARGET = 1.15
RUN_ID = "bench-bus"
KEY = signing.new_key()  # a run key: runs sign and verify every envelope
ACKED_RESENDS: list[tuple[int, int]] = []  # (resends, messages) per acked round
TOPIC = f"errorflow/{RUN_ID}/inbox/writer"

# A researcher's result message as the contamination scenario sends it (about 720 B).
PAYLOAD: dict[str, Any] = {
    "role": "researcher",
    "round": 0,
    "answer": {
        "claims": [],
        "abstained": False,
        "flags": [],
        "unresolved": ["papers"],
        "text": "stopped: unrecoverable:permission_denied",
        "revise": [],
    },
    "stopped": "unrecoverable:permission_denied",
    "trace": {
        "costs": {
            "backend_calls": 1,
            "model_calls": 1,
            "input_tokens": 448,
            "output_tokens": 40,
            "retries": 0,
            "sim_seconds": 0.05,
        },
        "failures": ["permission_denied"],
    },
}
ERRORS = [
    WireError(
        code=ErrorCode("permission_denied"),
        tool="search_papers",
        message="search_papers: permission_denied",
        origin="researcher",
    )
]


def build(seq: int) -> Envelope:
    return Envelope(
        run_id=RUN_ID,
        trial=seq // 10,
        seq=seq,
        sender="researcher",
        recipient="writer",
        kind=Kind.RESULT,
        trace_id=f"{RUN_ID}-t{seq // 10}",
        derived_from=[uuid.uuid4().hex],
        status=Status.FAILED,
        confidence=0.4,
        errors=ERRORS,
        payload=PAYLOAD,
        ts=time.time(),
    )


SAMPLE = build(10**6).encode()  # the raw path sends bytes of this size


def _client(url: BrokerURL, cid: str) -> aiomqtt.Client:
    return aiomqtt.Client(
        url.host,
        url.port,
        identifier=cid,
        username=url.username,
        password=url.password,
        protocol=aiomqtt.ProtocolVersion.V311,
        keepalive=15,
        timeout=10,
        clean_session=True,
    )


async def _publish_all(n: int, window: int, send: Any) -> None:
    """n publishes, `window` concurrent senders each awaiting its own PUBACKs."""
    per = [n // window + (1 if i < n % window else 0) for i in range(window)]
    starts = [sum(per[:i]) for i in range(window)]

    async def worker(start: int, count: int) -> None:
        for i in range(start, start + count):
            await send(i)

    await asyncio.gather(*(worker(s, c) for s, c in zip(starts, per, strict=True)))


async def raw_round(url: BrokerURL, n: int, window: int, payload: bytes = SAMPLE) -> float:
    """Seconds to move n payloads from one aiomqtt client to another, QoS 1."""
    tag = uuid.uuid4().hex[:6]
    async with _client(url, f"raw-sub-{tag}") as sub, _client(url, f"raw-pub-{tag}") as pub:
        no_delay(sub._client.socket())
        no_delay(pub._client.socket())
        await sub.subscribe(TOPIC, qos=1)
        got = 0
        done = asyncio.Event()

        async def reader() -> None:
            nonlocal got
            async for message in sub.messages:
                assert isinstance(message.payload, bytes)
                got += 1
                if got == n:
                    done.set()
                    return

        task = asyncio.create_task(reader())
        await asyncio.sleep(0.05)
        t0 = time.perf_counter()

        async def send(i: int) -> None:
            await pub.publish(TOPIC, payload, qos=1)

        await _publish_all(n, window, send)
        await asyncio.wait_for(done.wait(), 120)
        elapsed = time.perf_counter() - t0
        await task
        return elapsed


class _Window(PersistentStorage):  # type: ignore[misc]
    """gmqtt's own QoS 1 storage, counting PUBACKs: `window` publishes in flight."""

    def __init__(self, window: int) -> None:
        super().__init__()
        self.free = asyncio.Semaphore(window)
        self.inflight: set[int] = set()

    def push_message(self, mid: int, raw_package: bytes) -> None:
        super().push_message(mid, raw_package)
        self.inflight.add(mid)

    def remove_message_by_mid(self, mid: int) -> None:
        if mid in self.inflight:
            self.inflight.discard(mid)
            self.free.release()
        super().remove_message_by_mid(mid)


async def raw_gmqtt_round(url: BrokerURL, n: int, window: int, payload: bytes = SAMPLE) -> float:
    """Seconds to move n payloads between two raw gmqtt clients, QoS 1, at most `window`
    publishes waiting for their PUBACK (gmqtt's own storage tells us which are in)."""
    tag = uuid.uuid4().hex[:6]
    got = 0
    done, subscribed = asyncio.Event(), asyncio.Event()

    def on_message(client: Any, topic: str, data: bytes, qos: int, props: Any) -> int:
        nonlocal got
        got += 1
        if got == n:
            done.set()
        return 0

    storage = _Window(window)
    sub = gmqtt.Client(f"raw-sub-{tag}")
    pub = gmqtt.Client(f"raw-pub-{tag}", persistent_storage=storage)
    sub.on_message = on_message
    sub.on_subscribe = lambda *args: subscribed.set()
    for c in (sub, pub):
        if url.username:
            c.set_auth_credentials(url.username, url.password)
        await asyncio.wait_for(c.connect(url.host, url.port, keepalive=15, version=MQTTv311), 10)
    try:
        sub.subscribe(TOPIC, qos=1)
        await asyncio.wait_for(subscribed.wait(), 10)
        t0 = time.perf_counter()
        for _ in range(n):
            await storage.free.acquire()
            pub.publish(TOPIC, payload, qos=1)
        await asyncio.wait_for(storage.wait_empty(), 120)
        await asyncio.wait_for(done.wait(), 120)
        return time.perf_counter() - t0
    finally:
        for c in (pub, sub):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(c.disconnect(), 5)


RAW = {"aiomqtt": raw_round, "gmqtt": raw_gmqtt_round}
CONNECTION = {"aiomqtt": MqttConnection, "gmqtt": GmqttConnection}


async def errorflow_round(
    url: BrokerURL,
    n: int,
    window: int,
    envelopes: bool = True,
    client: str = "aiomqtt",
    signed: bool = True,
) -> float:
    """envelopes=False: the connection with ready bytes, no Envelope work (attribution);
    signed=False: envelopes without a key (the signing's own share)."""
    key = KEY if signed else None
    tag = uuid.uuid4().hex[:6]
    sub = CONNECTION[client](url, f"ef-sub-{tag}")
    pub = CONNECTION[client](url, f"ef-pub-{tag}")
    await sub.start()
    await pub.start()
    try:
        await sub.subscribe(TOPIC)
        receiver = Endpoint(sub, RUN_ID, "writer", {"researcher", "runner", "writer"}, key=key)
        got = 0
        done = asyncio.Event()

        async def reader() -> None:
            nonlocal got
            async for topic, raw in sub.messages():
                if envelopes:
                    env = receiver.check(topic, raw)
                    assert env is not None, receiver.rejects
                got += 1
                if got == n:
                    done.set()
                    return

        task = asyncio.create_task(reader())
        await asyncio.sleep(0.05)
        t0 = time.perf_counter()

        async def send(i: int) -> None:
            # The same work as Endpoint.send: build (validate), encode, publish.
            await pub.publish(TOPIC, build(i).encode(key) if envelopes else SAMPLE)

        await _publish_all(n, window, send)
        await asyncio.wait_for(done.wait(), 120)
        elapsed = time.perf_counter() - t0
        await task
        return elapsed
    finally:
        await pub.close()
        await sub.close()


async def acked_round(url: BrokerURL, n: int, window: int, client: str = "aiomqtt") -> float:
    """Endpoint to Endpoint with end-to-end acks: until n arrived and n acks are back."""
    tag = uuid.uuid4().hex[:6]
    sub = CONNECTION[client](url, f"ack-sub-{tag}")
    pub = CONNECTION[client](url, f"ack-pub-{tag}")
    await sub.start()
    await pub.start()
    members = {"researcher", "writer"}
    receiver = Endpoint(sub, RUN_ID, "writer", members, key=KEY)
    sender = Endpoint(pub, RUN_ID, "researcher", members, key=KEY)
    tasks: list[asyncio.Task[None]] = []
    try:
        await sub.subscribe(topics.inbox(RUN_ID, "writer"))
        await receiver.start()
        await sender.start()
        got = 0
        done = asyncio.Event()

        async def reader() -> None:
            nonlocal got
            async for _env in receiver.receive():
                got += 1
                if got == n:
                    done.set()

        async def ack_reader() -> None:
            async for _env in sender.receive():  # acks are consumed inside receive()
                pass

        tasks = [asyncio.create_task(reader()), asyncio.create_task(ack_reader())]
        await asyncio.sleep(0.05)
        t0 = time.perf_counter()

        async def send(i: int) -> None:
            await sender.send(
                kind=Kind.RESULT,
                recipient="writer",
                trial=i // 10,
                trace_id=f"{RUN_ID}-t{i // 10}",
                derived_from=[uuid.uuid4().hex],
                status=Status.FAILED,
                confidence=0.4,
                errors=ERRORS,
                payload=PAYLOAD,
            )

        await _publish_all(n, window, send)
        await asyncio.wait_for(done.wait(), 120)
        give_up = time.perf_counter() + 30  # resends of a deep backlog: not forever
        while sender.pending and time.perf_counter() < give_up:
            await asyncio.sleep(0.001)
        elapsed = time.perf_counter() - t0
        # Resends (a backlog older than the 2 s ack timeout) are part of the acked path's
        # cost: counted and printed, not an error; anything but their duplicates is.
        assert not set(receiver.rejects) - {"duplicate"}, receiver.rejects
        ACKED_RESENDS.append((sender.resent, n))
        return elapsed
    finally:
        for t in tasks:
            t.cancel()
        await sender.close()
        await receiver.close()
        await pub.close()
        await sub.close()


def cpu_costs(n: int = 5000) -> dict[str, float]:
    """Microseconds per message of the envelope work alone (no I/O)."""
    ep = Endpoint(None, RUN_ID, "writer", {"researcher"}, key=KEY)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    blobs = [build(i).encode(KEY) for i in range(n)]
    t1 = time.perf_counter()
    for b in blobs:
        decode(b)
    t2 = time.perf_counter()
    for b in blobs:
        ep.check(TOPIC, b)
    t3 = time.perf_counter()
    for b in blobs:
        signing.sign(KEY, b)
        signing.verify(KEY, b)
    t4 = time.perf_counter()
    return {
        "build+encode+sign": (t1 - t0) / n * 1e6,
        "decode": (t2 - t1) / n * 1e6,
        "check (decode+verify)": (t3 - t2) / n * 1e6,
        "sign+verify": (t4 - t3) / n * 1e6,
    }


#: A round that takes longer is stuck: every task's stack is printed, then it fails.
ROUND_LIMIT_S = 300.0


async def _watched(what: str, coro: Any) -> float:
    try:
        return float(await asyncio.wait_for(coro, ROUND_LIMIT_S))
    except TimeoutError:
        print(f"STUCK: {what} took over {ROUND_LIMIT_S:g}s; tasks:", flush=True)
        for task in asyncio.all_tasks():
            task.print_stack()
        raise


async def bench_broker(kind: str, n: int, rounds: int, client: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    raw = RAW[client]
    async with broker(kind) as url:
        await raw(url, min(n, 500), 8)  # warm-up (connections, broker caches)
        await errorflow_round(url, min(n, 500), 8, client=client)
        for shape, window, count in (("32 in flight", 32, n), ("1 in flight", 1, n // 4)):
            ratios, transport, acked, raws, efs, signing_share = [], [], [], [], [], []
            for r in range(rounds):
                # Rotate the order so drift in machine load does not favour one path.
                order = ["raw", "ef", "transport", "acked", "unsigned"]
                order = order[r % 5 :] + order[: r % 5]
                times: dict[str, float] = {}
                for path in order:
                    what = f"{kind} {client} {shape} {path} round {r + 1}"
                    if path == "raw":
                        times[path] = await _watched(what, raw(url, count, window))
                    elif path == "acked":
                        times[path] = await _watched(what, acked_round(url, count, window, client))
                    else:
                        times[path] = await _watched(
                            what,
                            errorflow_round(
                                url,
                                count,
                                window,
                                envelopes=path != "transport",
                                client=client,
                                signed=path == "ef",
                            ),
                        )
                raws.append(count / times["raw"])
                efs.append(count / times["ef"])
                ratios.append(times["ef"] / times["raw"])
                transport.append(times["transport"] / times["raw"])
                acked.append(times["acked"] / times["raw"])
                signing_share.append(times["ef"] / times["unsigned"])
            out[shape] = {
                "ratio": statistics.median(ratios),
                "ratios": ratios,
                "transport_ratio": statistics.median(transport),
                "acked_ratio": statistics.median(acked),
                "signed_ratio": statistics.median(signing_share),
                "raw_msgs_s": statistics.median(raws),
                "ef_msgs_s": statistics.median(efs),
                "count": count,
            }
    return out


async def main() -> None:
    args = parse_args(__doc__)
    n, rounds = (2000, 3) if args.quick else (6000, 5)
    print(
        f"bus overhead: {len(SAMPLE)}-byte envelopes, QoS 1, {rounds} alternating rounds, "
        f"n={n} (32 in flight) and n={n // 4} (1 in flight)"
    )
    costs = cpu_costs()
    print(
        "envelope CPU per message (no I/O): "
        + ", ".join(f"{k} {v:.1f} us" for k, v in costs.items())
    )
    results = {}
    for kind in ("embedded", "mosquitto"):
        for client in ("aiomqtt", "gmqtt"):
            results[f"{kind} {client}"] = await bench_broker(kind, n, rounds, client)
            print(f"  {kind} {client}: done", flush=True)
    print()
    print(
        row(
            "broker client / load",
            "raw msg/s   errorflow msg/s   errorflow/raw (median; rounds)"
            "   transport-only/raw   signed/unsigned   acked/raw",
        )
    )
    worst: dict[str, float] = {}  # by client
    for kind, shapes in results.items():
        client = kind.split()[1]
        for shape, r in shapes.items():
            worst[client] = max(worst.get(client, 0.0), r["ratio"])
            rounds_txt = " ".join(f"{x:.2f}" for x in r["ratios"])
            print(
                row(
                    f"{kind} / {shape}",
                    f"{r['raw_msgs_s']:9.0f}   {r['ef_msgs_s']:15.0f}   "
                    f"{r['ratio']:.2f}x ({rounds_txt})   {r['transport_ratio']:.2f}x"
                    f"   {r['signed_ratio']:.2f}x   {r['acked_ratio']:.2f}x",
                )
            )
    print()
    print(
        "transport-only: errorflow's connection with ready bytes and no Envelope work;"
        " the rest of the gap is building, encoding, decoding and validating envelopes."
    )
    print(
        "signed/unsigned: the same envelope path with and without the run key (HMAC-SHA256"
        " signing and verifying): what signing itself costs."
    )
    print(
        "acked: Endpoint.send/receive with end-to-end acks (an ack message per message);"
        " not judged against the target."
    )
    resent = sum(r for r, _ in ACKED_RESENDS)
    sent = sum(m for _, m in ACKED_RESENDS)
    print(f"acked rounds resent {resent} of {sent} messages (acks later than the 2 s timeout)")
    for client, ratio in worst.items():
        default = " (the default client)" if client == "aiomqtt" else ""
        print(
            f"target errorflow/raw <= {TARGET:.2f}x, {client}{default}: worst {ratio:.2f}x"
            f" -> {verdict(ratio <= TARGET)}"
        )


if __name__ == "__main__":
    run(main())
