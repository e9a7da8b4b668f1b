"""The outbox decides resends and give-ups from the time it is given: no clock, no I/O."""

from __future__ import annotations

from errorflow.bus.outbox import GiveUp, Outbox, Resend


def test_first_deadline_is_one_ack_timeout_after_the_send() -> None:
    box = Outbox(ack_timeout_s=2.0, max_resends=6)
    box.add("m", "t", b"raw", now=10.0)
    assert box.next_due() == 12.0
    assert box.due(11.999) == [] and box.resent == 0
    assert box.due(12.0) == [Resend("m", "t", b"raw", sends=2)]
    assert box.resent == 1 and "m" in box and len(box) == 1


def test_timeout_doubles_after_every_send_then_gives_up() -> None:
    box = Outbox(ack_timeout_s=1.0, max_resends=3)
    box.add("m", "t", b"raw", now=0.0)
    sent_at = [0.0]
    gave_up_at = None
    while (due := box.next_due()) is not None:
        for action in box.due(due):
            if isinstance(action, Resend):
                sent_at.append(due)
            else:
                assert action == GiveUp("m", sends=4)
                gave_up_at = due
    # waits after the 1st, 2nd, 3rd and 4th send: 1, 2, 4, 8 seconds
    assert sent_at == [0.0, 1.0, 3.0, 7.0] and gave_up_at == 15.0
    assert box.resent == 3 and box.undelivered == 1 and len(box) == 0
    assert box.due(1000.0) == [] and box.next_due() is None  # forgotten for good


def test_a_late_check_counts_the_doubling_from_when_it_resent() -> None:
    box = Outbox(ack_timeout_s=1.0, max_resends=6)
    box.add("m", "t", b"raw", now=0.0)
    assert len(box.due(5.0)) == 1  # checked late: resent at 5, not at 1
    assert box.next_due() == 7.0  # 5 + 1 * 2 ** (2 - 1)


def test_give_up_count_follows_max_resends() -> None:
    for max_resends in (0, 1, 6):
        box = Outbox(ack_timeout_s=0.5, max_resends=max_resends)
        box.add("m", "t", b"raw", now=0.0)
        actions = []
        while (due := box.next_due()) is not None:
            actions += box.due(due)
        assert [a for a in actions if isinstance(a, Resend)] == [
            Resend("m", "t", b"raw", sends=k) for k in range(2, max_resends + 2)
        ]
        assert actions[-1] == GiveUp("m", sends=max_resends + 1)
        assert box.resent == max_resends and box.undelivered == 1


def test_ack_removes_and_a_duplicate_or_unknown_ack_is_harmless() -> None:
    box = Outbox(ack_timeout_s=1.0, max_resends=6)
    box.add("a", "t", b"A", now=0.0)
    box.add("b", "t", b"B", now=0.5)
    box.ack("a")
    box.ack("a")
    box.ack("never-sent")
    assert "a" not in box and len(box) == 1
    assert box.due(100.0) == [Resend("b", "t", b"B", sends=2)]
    box.ack("b")
    assert box.due(1000.0) == [] and box.resent == 1 and box.undelivered == 0


def test_next_due_is_the_earliest_deadline() -> None:
    box = Outbox(ack_timeout_s=2.0, max_resends=6)
    assert box.next_due() is None
    box.add("late", "t", b"L", now=6.0)
    box.add("early", "t", b"E", now=1.0)  # inserted later, due sooner
    assert box.next_due() == 3.0
    assert box.due(3.0) == [Resend("early", "t", b"E", sends=2)]
    assert box.next_due() == 7.0  # "early" again, at 3 + 2 * 2; "late" at 8
    box.ack("early")
    assert box.next_due() == 8.0
    box.ack("late")
    assert box.next_due() is None


def test_due_messages_come_oldest_first() -> None:
    box = Outbox(ack_timeout_s=1.0, max_resends=6)
    for i, name in enumerate("cab"):
        box.add(name, f"t/{name}", name.encode(), now=i * 0.1)
    assert [a.message_id for a in box.due(10.0)] == ["c", "a", "b"]
