"""Envelope ids: the wire format they always had (32 hex digits, time first), unique in
a process and across processes, forked ones included, with no system call per id."""

from __future__ import annotations

import multiprocessing
import os
import re
from multiprocessing.queues import Queue
from typing import Any

import pytest

from errorflow.protocol.envelope import Envelope, Kind, new_id

HEX32 = re.compile(r"^[0-9a-f]{32}$")


def test_ids_keep_their_format_and_sort_by_creation() -> None:
    ids = [new_id() for _ in range(10_000)]
    assert all(HEX32.match(i) for i in ids)
    assert len(set(ids)) == len(ids)
    assert [i[:16] for i in ids] == sorted(i[:16] for i in ids)  # time first
    env = Envelope(run_id="r", trial=0, seq=0, sender="a", recipient="b", kind=Kind.TASK,
                   trace_id="t")  # fmt: skip
    assert HEX32.match(env.id)


def test_no_random_draw_per_id(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(n: int) -> bytes:
        raise AssertionError("os.urandom called for an id")

    monkeypatch.setattr(os, "urandom", refuse)
    first, second = new_id(), new_id()
    assert first != second


def _ids(out: Queue[list[str]]) -> None:
    out.put([new_id() for _ in range(1000)])


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_other_processes_make_other_ids(method: str) -> None:
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} here")
    ctx: Any = multiprocessing.get_context(method)
    out: Queue[list[str]] = ctx.Queue()
    new_id()  # the parent's counter has moved: a forked child must not carry it on
    procs = [ctx.Process(target=_ids, args=(out,)) for _ in range(2)]
    for p in procs:
        p.start()
    theirs = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
    ours = [new_id() for _ in range(1000)]
    tags = {ids[0][16:24] for ids in [*theirs, ours]}
    assert len(tags) == 3  # a tag per process
    every = [i for ids in [*theirs, ours] for i in ids]
    assert len(set(every)) == len(every)
