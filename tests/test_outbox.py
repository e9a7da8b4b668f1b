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


def _acked_after(box: Outbox, delays: list[float]) -> None:
    """Messages sent one a second, each acked `delay` after its send."""
    for i, delay in enumerate(delays):
        box.add(f"a{i}", "t", b"raw", now=float(i))
        box.ack(f"a{i}", now=i + delay)


def test_a_fixed_outbox_ignores_ack_times() -> None:
    box = Outbox(ack_timeout_s=2.0, max_resends=6)
    _acked_after(box, [5.0] * 10)
    assert box.timeout() == 2.0 and box.srtt is None


def test_an_adaptive_timeout_follows_slow_acks_and_so_sends_no_copies() -> None:
    """A receiver that acks 3 s after each send (a backlog, not a loss): the fixed
    timeout resends every message once; the adaptive one learns the ack time and waits
    (srtt + 4 * rttvar, RFC 6298)."""
    fixed, adaptive = Outbox(2.0, 6), Outbox(2.0, 6, adaptive=True)
    for box in (fixed, adaptive):
        box.add("first", "t", b"raw", now=0.0)
        box.ack("first", now=3.0)  # before any deadline passed: no resend
        for i in range(20):
            box.add(f"m{i}", "t", b"raw", now=10.0 + i)
            box.due(12.5 + i)  # the driver's check, half a second past 2 s
            box.ack(f"m{i}", now=13.0 + i)
    assert fixed.resent == 20
    assert adaptive.resent == 0
    assert adaptive.srtt == 3.0 and 3.0 < adaptive.timeout() <= 3.0 + 4 * 1.5


def test_the_adaptive_timeout_never_drops_below_the_configured_one_nor_above_the_cap() -> None:
    from errorflow.bus.outbox import MAX_TIMEOUT_S

    quick = Outbox(ack_timeout_s=2.0, max_resends=6, adaptive=True)
    _acked_after(quick, [0.001] * 50)
    assert quick.timeout() == 2.0  # a lost message is still resent after 2 s
    slow = Outbox(ack_timeout_s=2.0, max_resends=6, adaptive=True)
    _acked_after(slow, [500.0] * 5)
    assert slow.timeout() == MAX_TIMEOUT_S


def test_a_resent_message_teaches_the_timeout_nothing() -> None:
    """Karn's rule: the ack of a resent message may answer either send."""
    box = Outbox(ack_timeout_s=2.0, max_resends=6, adaptive=True)
    box.add("m", "t", b"raw", now=0.0)
    assert box.due(2.0) == [Resend("m", "t", b"raw", sends=2)]
    box.ack("m", now=9.0)
    assert box.srtt is None
    assert box.timeout() == 4.0  # still backed off: 2 s proved too short, nothing newer


def test_resends_of_an_adaptive_outbox_double_from_the_learned_timeout() -> None:
    box = Outbox(ack_timeout_s=1.0, max_resends=2, adaptive=True)
    _acked_after(box, [4.0])  # srtt 4, rttvar 2: timeout 12
    assert box.timeout() == 12.0
    box.add("m", "t", b"raw", now=100.0)
    assert box.next_due() == 112.0
    assert box.due(112.0) == [Resend("m", "t", b"raw", sends=2)]
    assert box.next_due() == 112.0 + 24.0


def test_a_resend_backs_the_next_messages_off_until_an_ack_teaches_the_timeout() -> None:
    """Every message resent (so no ack teaches anything): the next one waits twice as
    long; an ack of a message sent once brings the estimate back."""
    box = Outbox(ack_timeout_s=2.0, max_resends=6, adaptive=True)
    box.add("a", "t", b"raw", now=0.0)
    box.due(2.0)  # resent: 2 s was too short
    assert box.timeout() == 4.0
    box.add("b", "t", b"raw", now=3.0)
    assert box.next_due() == 2.0 + 4.0  # a's resend; b is due at 3 + 4
    box.ack("a", now=3.5)  # a resent message: still nothing learned
    assert box.timeout() == 4.0
    box.ack("b", now=4.0)  # sent once, acked after 1 s
    assert box.srtt == 1.0 and box.timeout() == 3.0
