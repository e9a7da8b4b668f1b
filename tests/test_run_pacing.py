import gc
import sys
import threading
from collections.abc import Iterator

import pytest

from errorflow.core.run_pacing import SWITCH_INTERVAL_S, YOUNG_THRESHOLD, paced_for_run


@pytest.fixture
def collector() -> Iterator[None]:
    """The collector as the test found it, whatever a failing test left."""
    threshold, switch = gc.get_threshold(), sys.getswitchinterval()
    yield
    gc.set_threshold(*threshold)
    gc.unfreeze()
    sys.setswitchinterval(switch)


def test_a_run_paces_the_collector_and_gives_it_back(collector: None) -> None:
    gc.set_threshold(700, 10, 10)
    with paced_for_run():
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
        assert gc.get_freeze_count() > 0  # what existed before is out of the way
        with paced_for_run():  # a run inside a run (a sweep's arm)
            assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
        assert gc.get_freeze_count() > 0  # still inside the outer run
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_the_last_run_to_end_restores_it_whatever_the_order(collector: None) -> None:
    gc.set_threshold(700, 10, 10)
    first, second = paced_for_run(), paced_for_run()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # the first run ends before the second
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
    second.__exit__(None, None, None)
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0


def test_a_process_that_froze_objects_itself_keeps_them_frozen(collector: None) -> None:
    gc.freeze()
    frozen = gc.get_freeze_count()
    with paced_for_run():
        pass
    assert abs(gc.get_freeze_count() - frozen) < 100  # not unfrozen (0)


def test_a_higher_threshold_of_the_process_is_kept(collector: None) -> None:
    gc.set_threshold(100_000, 10, 10)
    with paced_for_run():
        assert gc.get_threshold()[0] == 100_000


def test_a_cycle_made_during_a_run_is_still_collected(collector: None) -> None:
    freed = threading.Event()

    class Node:
        def __del__(self) -> None:
            freed.set()

    with paced_for_run():
        node = Node()
        node.self = node  # type: ignore[attr-defined]
        del node
        gc.collect()
        assert freed.is_set()


def test_a_run_hands_the_lock_between_threads_sooner_and_gives_it_back(collector: None) -> None:
    sys.setswitchinterval(0.005)
    first, second = paced_for_run(), paced_for_run()
    first.__enter__()
    assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S, abs=1e-6)
    second.__enter__()
    first.__exit__(None, None, None)  # the first run ends before the second
    assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S, abs=1e-6)
    second.__exit__(None, None, None)
    assert sys.getswitchinterval() == pytest.approx(0.005, abs=1e-6)
    sys.setswitchinterval(0.0002)  # a process's own shorter one is kept
    with paced_for_run():
        assert sys.getswitchinterval() == pytest.approx(0.0002, abs=5e-6)
    assert sys.getswitchinterval() == pytest.approx(0.0002, abs=5e-6)
