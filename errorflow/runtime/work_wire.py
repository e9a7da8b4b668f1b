"""What `errorflow worker` processes and the runner that hands them trials say to each
other on the broker (errorflow/runtime/broker_workers.py has the protocol).

Every message is a compact JSON object signed with the run key as envelopes are
(`signing.sign`: the HMAC is the last member), so a client without the key can neither
hand workers a scenario to run nor inject results; one that fails the check is dropped.
The key never travels: workers are given it out of band (`--key-file`, or
ERRORFLOW_RUN_KEY), as `errorflow agent`s are. The scenario a work item carries may
hold secrets (its redacted form is what is stored and published elsewhere), so it
travels encrypted under a key derived from the run key (`box`: AES-256-GCM from the
`cryptography` package, a random 96-bit nonce per item; the item is signed over the
ciphertext too), and only the run's workers can read it. The results (scores, the
trials' stored messages, redacted as the store keeps them) are signed, not encrypted,
as a run on the broker sends its messages: TLS (`mqtts://`) and the broker's ACLs keep
them from other eyes.

Topics live under `errorflow-workers/{key id}/`, the key id an HMAC of a fixed string
under the run key (it says nothing about the key), so workers only ever take items
they can verify, and runs under other keys never reach them:

  .../items/{run_id}          work items, taken through the shared subscription
                              `$share/errorflow-workers/.../items/{run_id or +}`
  .../runs/{run_id}/taken     a worker says it started an item
  .../runs/{run_id}/parts     a batch's results, in parts under MAX_MESSAGE_BYTES
  .../runs/{run_id}/end       the runner says the run is over (`--run` workers leave)
  .../workers/{name}          a worker's heartbeat, and its last will (`gone`)
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import zlib
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import aiomqtt
from aiomqtt import Client
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from errorflow.bus.mqtt import NO_DELAY, _tls_params, unguessable
from errorflow.bus.url import BrokerURL
from errorflow.core.costs import Costs
from errorflow.protocol import signing
from errorflow.protocol.envelope import MAX_MESSAGE_BYTES
from errorflow.scoring.score import (
    Label,
    MessageLabel,
    Outcome,
    TrialScore,
)

ROOT = "errorflow-workers"
SHARE_GROUP = "errorflow-workers"
#: Raw bytes of results per part: base64 makes them 4/3 larger, the header is small,
#: so a part stays well under the bus's message size limit.
PART_BYTES = (MAX_MESSAGE_BYTES * 3) // 5
WORKER_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")

Doc = dict[str, Any]


def key_id(key: bytes) -> str:
    return hmac.new(key, b"errorflow-workers topic", hashlib.sha256).hexdigest()[:16]


def items_topic(key: bytes, run_id: str) -> str:
    return f"{ROOT}/{key_id(key)}/items/{run_id}"


def items_filter(key: bytes, run_id: str | None) -> str:
    """The shared subscription a worker takes items through (one run, or any)."""
    return f"$share/{SHARE_GROUP}/{ROOT}/{key_id(key)}/items/{run_id or '+'}"


def run_topic(key: bytes, run_id: str, what: str) -> str:
    return f"{ROOT}/{key_id(key)}/runs/{run_id}/{what}"


def run_filter(key: bytes, run_id: str) -> str:
    return f"{ROOT}/{key_id(key)}/runs/{run_id}/+"


def worker_topic(key: bytes, name: str) -> str:
    return f"{ROOT}/{key_id(key)}/workers/{name}"


def workers_filter(key: bytes) -> str:
    return f"{ROOT}/{key_id(key)}/workers/+"


def _box_key(key: bytes) -> AESGCM:
    """AES-256-GCM under a key derived from the run key (never the run key itself)."""
    return AESGCM(hmac.new(key, b"errorflow-workers scenario", hashlib.sha256).digest())


def box(key: bytes, data: bytes) -> Doc:
    """`data` encrypted and authenticated under the run key (AES-GCM, `cryptography`)."""
    nonce = secrets.token_bytes(12)
    cipher = _box_key(key).encrypt(nonce, data, b"errorflow-workers")
    return {"nonce": nonce.hex(), "data": base64.b64encode(cipher).decode()}


def unbox(key: bytes, doc: Doc) -> bytes:
    """The plain data; `cryptography.exceptions.InvalidTag` if it was not boxed with
    this key or was changed."""
    nonce, cipher = bytes.fromhex(doc["nonce"]), base64.b64decode(doc["data"])
    return _box_key(key).decrypt(nonce, cipher, b"errorflow-workers")


def seal(key: bytes, doc: Doc) -> bytes:
    body = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    return signing.sign(key, body)


def unseal(key: bytes, raw: bytes) -> Doc | None:
    """The message's object if it is signed with `key`; None for anything else."""
    if len(raw) > MAX_MESSAGE_BYTES or signing.verify(key, raw) is not None:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("t"), str):
        return None
    doc.pop("sig", None)
    return doc


# -- scores --------------------------------------------------------------------------------


def score_doc(score: TrialScore) -> Doc:
    return asdict(score)


def score_of(doc: Doc) -> TrialScore:
    labels = [
        MessageLabel(m["message_id"], m["sender"], Label(m["label"]), m["reason"], m["touched"])
        for m in doc["labels"]
    ]
    return TrialScore(
        trial=int(doc["trial"]),
        outcome=Outcome(doc["outcome"]),
        depth=int(doc["depth"]),
        labels=labels,
        costs=Costs(**doc["costs"]),
        reason=doc["reason"],
        policy=doc["policy"],
        credit={str(k): str(v) for k, v in (doc.get("credit") or {}).items()},
        struck=bool(doc.get("struck", False)),
    )


# -- a batch's results: a header and the shard's store, compressed, in parts ---------------


def pack(meta: Doc, store: bytes) -> bytes:
    head = json.dumps(meta, separators=(",", ":")).encode()
    return zlib.compress(len(head).to_bytes(4, "big") + head + store, 6)


def unpack(blob: bytes) -> tuple[Doc, bytes]:
    raw = zlib.decompress(blob)
    size = int.from_bytes(raw[:4], "big")
    meta = json.loads(raw[4 : 4 + size])
    if not isinstance(meta, dict):
        raise ValueError("a batch's header is a JSON object")
    return meta, raw[4 + size :]


def parts_of(blob: bytes, head: Doc) -> Iterator[Doc]:
    """`blob` cut into part messages, each `head` (run, batch, attempt, worker) plus
    its place, the count and the whole blob's digest."""
    digest = hashlib.sha256(blob).hexdigest()
    count = max(1, -(-len(blob) // PART_BYTES))
    for i in range(count):
        data = blob[i * PART_BYTES : (i + 1) * PART_BYTES]
        yield {**head, "t": "part", "i": i, "n": count, "sha": digest,
               "data": base64.b64encode(data).decode()}  # fmt: skip


def joined(parts: dict[int, Doc]) -> bytes | None:
    """The blob, once every part is there and the digest holds (None: not yet, or
    parts that do not belong together)."""
    first = next(iter(parts.values()))
    count, digest = first["n"], first["sha"]
    if len(parts) < count:
        return None
    if any(p["n"] != count or p["sha"] != digest for p in parts.values()):
        return None
    blob = b"".join(base64.b64decode(parts[i]["data"]) for i in range(count))
    return blob if hashlib.sha256(blob).hexdigest() == digest else None


# -- connections ---------------------------------------------------------------------------


def mqtt_client(url: BrokerURL, client_id: str, will: tuple[str, bytes] | None = None) -> Client:
    """An aiomqtt session for the work channel (MQTT 3.1.1, which Mosquitto and EMQX
    give shared subscriptions on too). The bus's own connections are not used: they
    drop messages whose topic matches none of their filters, and `$share/...` filters
    match no topic by name."""
    return aiomqtt.Client(
        url.host,
        url.port,
        identifier=unguessable(client_id),
        username=url.username,
        password=url.password,
        protocol=aiomqtt.ProtocolVersion.V311,
        tls_params=_tls_params(url),
        keepalive=15,
        timeout=10,
        clean_session=True,
        socket_options=[NO_DELAY],
        will=None if will is None else aiomqtt.Will(will[0], will[1], qos=1, retain=False),
    )
