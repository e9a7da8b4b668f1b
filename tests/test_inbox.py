"""A connection's inbox behaves as `asyncio.Queue` does where the bus uses it: FIFO,
bounded, readers and writers waiting their turn, a cancelled waiter passing it on."""

from __future__ import annotations

import asyncio

import pytest

from errorflow.bus.inbox import Inbox


async def test_items_come_out_in_the_order_they_went_in() -> None:
    box: Inbox[int] = Inbox()
    for i in range(5):
        box.put_nowait(i)
    assert box.qsize() == 5 and not box.empty() and not box.full()
    assert [box.get_nowait() for _ in range(3)] + [await box.get(), await box.get()] == [
        0,
        1,
        2,
        3,
        4,
    ]
    assert box.empty()
    with pytest.raises(asyncio.QueueEmpty):
        box.get_nowait()


async def test_a_full_inbox_refuses_at_once_and_makes_a_writer_wait_for_room() -> None:
    box: Inbox[int] = Inbox(2)
    box.put_nowait(1)
    box.put_nowait(2)
    assert box.full()
    with pytest.raises(asyncio.QueueFull):
        box.put_nowait(3)
    writer = asyncio.create_task(box.put(3))
    await asyncio.sleep(0)
    assert not writer.done()  # waiting for room
    assert box.get_nowait() == 1
    await asyncio.wait_for(writer, 1)
    assert [box.get_nowait(), box.get_nowait()] == [2, 3]


async def test_readers_wait_in_line_and_each_gets_one_item() -> None:
    box: Inbox[str] = Inbox()
    readers = [asyncio.create_task(box.get()) for _ in range(3)]
    await asyncio.sleep(0)
    assert not any(r.done() for r in readers)
    for item in "abc":
        box.put_nowait(item)
    assert [await asyncio.wait_for(r, 1) for r in readers] == ["a", "b", "c"]


async def test_a_reader_cancelled_after_it_was_woken_passes_the_item_on() -> None:
    box: Inbox[str] = Inbox()
    first, second = asyncio.create_task(box.get()), asyncio.create_task(box.get())
    await asyncio.sleep(0)
    box.put_nowait("x")  # wakes the first reader ...
    first.cancel()  # ... which is cancelled before it takes the item
    assert await asyncio.wait_for(second, 1) == "x"
    assert first.cancelled()


async def test_a_writer_cancelled_while_waiting_leaves_the_line() -> None:
    box: Inbox[int] = Inbox(1)
    box.put_nowait(0)
    gone, stays = asyncio.create_task(box.put(1)), asyncio.create_task(box.put(2))
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.sleep(0)
    assert box.get_nowait() == 0
    await asyncio.wait_for(stays, 1)
    assert box.get_nowait() == 2 and box.empty()


async def test_a_writer_cancelled_in_line_does_not_wake_another_out_of_turn() -> None:
    box: Inbox[str] = Inbox(1)
    box.put_nowait("0")
    gone = asyncio.create_task(box.put("x"))
    writers = [asyncio.create_task(box.put(f"a{i}")) for i in (1, 2, 3)]
    await asyncio.sleep(0)  # all four wait for room, in this order
    gone.cancel()  # the first is cancelled in line ...
    order = [box.get_nowait()]  # ... as room is made, before its task runs
    for _ in range(3):
        for _ in range(5):
            await asyncio.sleep(0)
        order.append(box.get_nowait())
    await asyncio.gather(*writers)
    assert order == ["0", "a1", "a2", "a3"]
