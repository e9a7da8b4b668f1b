"""Recorder throughput: events per second `Recorder.handle` + `flush` sustain into SQLite.

The input is real traffic: a short in-process run of the contamination scenario is
recorded first, and its envelopes (messages and events, in their recorded mix) are
re-stamped with fresh ids and per-sender seqs and replayed N times over. The recorder
is fed exactly as its `_run` loop feeds it: `handle(topic, raw)` per message and
`await flush()` every `BATCH` rows (WAL, synchronous=NORMAL, aiosqlite's writer
thread), plus a final flush; no bus, so the figure is the recorder's own ceiling.
Reported: envelopes/s overall, and the split between handle (decode + validate + row
building, on the event loop) and flush (SQLite, in aiosqlite's thread). Target:
>= 50,000/s. Ids are re-stamped with the package's own `new_id` (time-ordered), and
`decode` is the package's (fast path first). One candidate, not in the package:
flushing in the background while the next batch is decoded.

    python bench/bench_recorder.py [--quick]
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from _util import parse_args, row, run, scenario, temp_db, verdict

from errorflow.bus.transport import InProcessBus
from errorflow.protocol import signing
from errorflow.protocol.envelope import new_id
from errorflow.runtime.recorder import BATCH, Recorder
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.store.opening import open_db

KEY = signing.new_key()

TARGET = 50_000
CURRENT = "current (as shipped)"


async def sample_traffic(db_path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(topic, envelope dict) of a recorded 100-trial contamination run, in order."""
    import sqlite3

    await run_scenario(
        scenario("contamination", trials=100),
        RunOptions(bus=InProcessBus(), db_path=db_path, keep_messages=False),
    )
    conn = sqlite3.connect(db_path)
    rows = conn.execute(
        "SELECT topic, envelope, received FROM messages UNION ALL "
        "SELECT 'errorflow/x/events/' || sender, envelope, received FROM events "
        "ORDER BY received"
    ).fetchall()
    conn.close()
    return [(topic, json.loads(text)) for topic, text, _ in rows]


def restamp(
    sample: list[tuple[str, dict[str, Any]]], n: int, run_id: str
) -> list[tuple[str, bytes]]:
    seqs: dict[str, int] = defaultdict(int)
    out = []
    for i in range(n):
        topic, env = sample[i % len(sample)]
        d = dict(
            env,
            run_id=run_id,
            id=new_id(),
            seq=seqs[env["sender"]],
            trial=i // len(sample) * 1000 + env["trial"],
        )
        d.pop("sig", None)  # signed again below, as its sender would
        seqs[env["sender"]] += 1
        parts = topic.split("/")
        parts[1] = run_id
        body = json.dumps(d, separators=(",", ":")).encode()
        out.append(("/".join(parts), signing.sign(KEY, body)))  # runs verify every envelope
    return out


async def one_pass(
    db_path: Path, traffic: list[tuple[str, bytes]], run_id: str, overlap: bool = False
) -> dict[str, float]:
    """overlap: the candidate `_run` that lets one flush run in aiosqlite's thread while
    the next batch is decoded (sqlite3 releases the GIL while it steps)."""
    db = await open_db(db_path)
    try:
        rec = Recorder(db, None, run_id, {"runner", "researcher", "writer"}, key=KEY)  # type: ignore[arg-type]
        t_handle = t_flush = 0.0
        inflight: asyncio.Task[None] | None = None
        t0 = time.perf_counter()
        for topic, raw in traffic:
            h0 = time.perf_counter()
            rec.handle(topic, raw)
            t_handle += time.perf_counter() - h0
            if len(rec._messages) + len(rec._events) >= BATCH:
                f0 = time.perf_counter()
                if overlap:
                    if inflight is not None:
                        await inflight
                    inflight = asyncio.create_task(rec.flush())
                    await asyncio.sleep(0)  # flush takes its batch before we go on
                else:
                    await rec.flush()
                t_flush += time.perf_counter() - f0
        f0 = time.perf_counter()
        if inflight is not None:
            await inflight
        await rec.flush()
        t_flush += time.perf_counter() - f0
        total = time.perf_counter() - t0
        assert not rec.rejects, rec.rejects
        stored = (
            await db.execute_fetchall(
                "SELECT (SELECT count(*) FROM messages WHERE run_id = ?) + "
                "(SELECT count(*) FROM events WHERE run_id = ?)",
                (run_id, run_id),
            )
        )[0][0]
        assert stored == len(traffic), (stored, len(traffic))
        return {"total": total, "handle": t_handle, "flush": t_flush}
    finally:
        await db.close()


async def main() -> None:
    args = parse_args(__doc__)
    n, rounds = (40_000, 2) if args.quick else (100_000, 3)
    with temp_db() as db_path:
        sample = await sample_traffic(db_path.with_name("sample.db"))
        n_events = sum(1 for t, _ in sample if "/events/" in t)
        size = statistics.mean(len(json.dumps(e, separators=(",", ":"))) for _, e in sample)
        print(
            f"recorder: {n} envelopes per pass ({n_events / len(sample):.0%} events, "
            f"mean {size:.0f} B), batch {BATCH}, WAL, {rounds} rounds each"
        )
        variants = {CURRENT: False, "overlapped flush": True}  # label: overlapped flush
        results: dict[str, list[dict[str, float]]] = {k: [] for k in variants}
        for r in range(rounds):
            order = list(variants)[r % len(variants) :] + list(variants)[: r % len(variants)]
            for label in order:
                run_id = f"bench-rec-{uuid.uuid4().hex[:6]}"
                traffic = restamp(sample, n, run_id)
                results[label].append(await one_pass(db_path, traffic, run_id, variants[label]))
        print()
        print(
            row(
                "variant",
                "envelopes/s   handle us/env   flush wait us/env   (median of rounds)",
                width=38,
            )
        )
        med = {}
        for label, runs in results.items():
            rate = statistics.median(n / x["total"] for x in runs)
            h = statistics.median(x["handle"] / n * 1e6 for x in runs)
            f = statistics.median(x["flush"] / n * 1e6 for x in runs)
            med[label] = rate
            print(row(label, f"{rate:11.0f}   {h:13.1f}   {f:17.1f}", width=38))
        print()
        for label in list(variants)[1:]:
            print(f"{label} / current: {med[label] / med[CURRENT]:.2f}x")
        cur = med[CURRENT]
        print(
            f"target >= {TARGET}/s: current {cur:.0f}/s ({cur / TARGET:.2f} of target) -> "
            f"{verdict(cur >= TARGET)}"
        )


if __name__ == "__main__":
    run(main())
