from errorflow.protocol import topics
from errorflow.protocol.envelope import Kind


def test_layout_is_one_namespace_per_run() -> None:
    assert topics.inbox("r1", "writer") == "errorflow/r1/inbox/writer"
    assert topics.events("r1", "writer") == "errorflow/r1/events/writer"
    assert topics.for_message("r1", Kind.EVENT, "a", "b") == "errorflow/r1/events/a"
    assert topics.for_message("r1", Kind.CONTROL, "a", "b") == "errorflow/r1/control/a"
    assert topics.for_message("r1", Kind.TASK, "a", "b") == "errorflow/r1/inbox/b"
    assert topics.run_of("errorflow/r1/inbox/b") == "r1"
    assert topics.run_of("other/r1/x") is None


def test_wildcards() -> None:
    assert topics.matches("errorflow/r1/inbox/w", "errorflow/r1/#")
    assert topics.matches("errorflow/r1/inbox/w", "errorflow/r1/inbox/+")
    assert not topics.matches("errorflow/r2/inbox/w", "errorflow/r1/#")
    assert not topics.matches("errorflow/r1/inbox/w/x", "errorflow/r1/inbox/+")
    assert not topics.matches("errorflow/r1", "errorflow/r1/inbox/+")
