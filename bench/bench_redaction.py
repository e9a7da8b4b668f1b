"""Redaction's nets: what each envelope sent and each row stored pays for the check.

The input is real traffic: short in-process runs of four bundled scenarios are recorded,
and their envelopes (roll calls left out: one a run) are read back. Per envelope, CPU time
in the same process, medians of --repeat passes taken in turns:

- encode: `Envelope.encode(key)` (JSON and HMAC), what every send paid before;
- send net: `redaction.sealed(env, key)`, which encodes, then searches the text from the
  errors on (`might_hold_secret`); the net's cost is the difference;
- store net: what a stored envelope's text goes through (`store._stored`: a search of
  its errors and payload, and of its ids);
- without the pre-check: `redact_obj` of the payload and errors, memo cleared each pass
  (what a net that ran the patterns on every envelope would pay);
- a payload with a secret: the slow path (search, redact, compare, encode again).

No target: the figures say what the nets cost next to what they replace.

    python bench/bench_redaction.py [--quick] [--repeat N]
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from _util import parse_args, row, scenario, temp_db

from errorflow.bus.redaction import sealed
from errorflow.bus.transport import InProcessBus
from errorflow.core.redact import redact, redact_obj
from errorflow.protocol import signing
from errorflow.protocol.envelope import Envelope
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.store.rows import _stored

KEY = signing.new_key()
SCENARIOS = ("contamination", "support-pipeline", "order-desk", "analytics-pipeline")


async def sample(db_path: Path, trials: int) -> list[str]:
    for name in SCENARIOS:
        await run_scenario(
            scenario(name, trials=trials),
            RunOptions(bus=InProcessBus(), db_path=db_path, keep_messages=False),
        )
    with sqlite3.connect(db_path) as conn:
        rows = conn.execute(
            "SELECT envelope FROM messages UNION ALL SELECT envelope FROM events"
        ).fetchall()
    return [text for (text,) in rows if '"roll_call"' not in text]


def per_item(fns: dict[str, Callable[[], object]], n: int, repeat: int) -> dict[str, float]:
    """CPU µs per item of each `fn` (each handles `n` items): the median of `repeat`
    passes, the candidates taking turns in every pass (the machine is shared)."""
    times: dict[str, list[float]] = {label: [] for label in fns}
    for _ in range(repeat):
        for label, fn in fns.items():
            t0 = time.process_time()
            fn()
            times[label].append(time.process_time() - t0)
    return {label: statistics.median(t) / n * 1e6 for label, t in times.items()}


def main() -> None:
    args = parse_args(
        __doc__, [("--repeat", {"type": int, "default": 7, "help": "passes (median)"})]
    )
    with temp_db() as db:
        texts = asyncio.run(sample(db, 10 if args.quick else 40))
    envs = [Envelope.model_validate_json(t) for t in texts]
    n = len(envs)
    secret = [
        e.model_copy(update={"payload": {**e.payload, "x": "ghp_abcdefghij1234"}}) for e in envs
    ]

    def full() -> None:
        redact.cache_clear()
        for e in envs:
            redact_obj(e.payload)
            redact_obj([x.model_dump() for x in e.errors])

    figures = per_item(
        {
            "encode": lambda: [e.encode(KEY) for e in envs],
            "send net": lambda: [sealed(e, KEY) for e in envs],
            "store net": lambda: [_stored(e, t) for e, t in zip(envs, texts, strict=True)],
            "without the pre-check": full,
            "with a secret": lambda: [sealed(e, KEY) for e in secret],
        },
        n,
        args.repeat,
    )
    flagged = sum(1 for e in envs if sealed(e, KEY)[0] is not e)
    size = statistics.mean(len(t) for t in texts)
    print(f"{n} envelopes of {', '.join(SCENARIOS)} (mean {size:.0f} bytes); "
          f"{flagged} changed by the net")  # fmt: skip
    for label, us in figures.items():
        print(row(label, f"{us:7.2f} µs/envelope"))
    cost = figures["send net"] - figures["encode"]
    full = figures["without the pre-check"]
    print(row("send net's own cost", f"{cost:7.2f} µs ({cost / figures['encode']:.2f}× encode, "
              f"{cost / full:.0%} of redacting every payload)"))  # fmt: skip
    print(json.dumps({k: round(v, 3) for k, v in figures.items()}))


if __name__ == "__main__":
    main()
