"""The runner's task payload: written exactly, read defensively."""

from __future__ import annotations

from errorflow.protocol.task import TaskPayload


def test_a_task_reads_back_from_its_wire() -> None:
    task = TaskPayload("find the papers", ("papers", "authors"))
    assert task.to_wire() == {"prompt": "find the papers", "needs": ["papers", "authors"]}
    assert TaskPayload.from_wire(task.to_wire()) == task


def test_a_malformed_task_reads_as_its_text_and_no_needs() -> None:
    assert TaskPayload.from_wire({}) == TaskPayload("", ())
    assert TaskPayload.from_wire({"prompt": 3, "needs": "ab"}) == TaskPayload("3", ())
