"""`errorflow trace` as text: what it must show on the contamination story, in 80
columns."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from errorflow.reports.trace_view import trace_lines
from errorflow.scoring.trial_trace import TrialTrace
from errorflow.store.readers import trial_rows
from errorflow.store.trial_store import load_trace
from tests.trace_runs import run_stored


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """contamination, 20 trials, each arm: (db, implicit run id, explicit run id)."""
    db = tmp_path_factory.mktemp("trace") / "t.db"
    implicit, _ = run_stored("contamination", db, trials=20, propagation="implicit")
    explicit, _ = run_stored("contamination", db, trials=20, propagation="explicit")
    return db, implicit.run_id, explicit.run_id


def first(db: Path, run_id: str, outcome: str) -> TrialTrace:
    trial = next(t["trial"] for t in trial_rows(db, run_id) if t["outcome"] == outcome)
    trace = load_trace(db, run_id, trial)
    assert trace is not None
    return trace


def flat(lines: list[str]) -> str:
    """The text without its line breaks and tree drawing (a phrase may wrap)."""
    return re.sub(r"\s+", " ", re.sub(r"[│└├]─?", " ", "\n".join(lines)))


def test_implicit_names_the_origin_where_it_was_swallowed_and_the_depth(
    story: tuple[Path, str, str],
) -> None:
    db, implicit, _ = story
    t = first(db, implicit, "contaminated")
    text = flat(trace_lines(t, 80))
    assert "outcome contaminated · depth 2" in text
    assert "origin researcher · search_papers · step 1 · papers#0" in text
    assert "permission_denied (HTTP 401) after 1 attempt" in text
    assert "at researcher: swallowed: its own failure, and the message says ok" in text
    assert "dropped by: researcher (swallowed), writer (silent)" in text
    assert "contamination starts at researcher" in text
    # every message, with its label and why
    assert text.count("· ✗ contaminated") == 2
    assert "why: false claim(s) stated as certain: papers" in text
    # what the researcher's model was shown for its failed call
    assert "an empty result: the permission_denied (HTTP 401) was swallowed" in text


def test_explicit_shows_the_error_carried_hops_0_then_1_and_the_writers_flag(
    story: tuple[Path, str, str],
) -> None:
    db, _, explicit = story
    t = first(db, explicit, "contained")
    text = flat(trace_lines(t, 80))
    assert "error carried: researcher → writer hops 0, writer → runner hops 1" in text
    assert "error: permission_denied from researcher (search_papers), hops 0" in text
    assert "error: permission_denied from researcher (search_papers), hops 1" in text
    assert "flags: papers: upstream failure; not reported as fact" in text
    assert "contained first at: researcher" in text
    assert t.root_cause is not None and t.root_cause.primary is not None
    assert t.root_cause.primary.said == "reported"


@pytest.mark.parametrize("width", [80, 60])
def test_every_line_fits_and_the_timeline_is_in_order(
    story: tuple[Path, str, str], width: int
) -> None:
    db, implicit, explicit = story
    for run_id, outcome in ((implicit, "contaminated"), (explicit, "contained")):
        lines = trace_lines(first(db, run_id, outcome), width)
        assert max(map(len, lines)) <= width
        start = lines.index(next(x for x in lines if x.startswith("Timeline")))
        timeline = lines[start + 1 : lines.index("Not stored")]
        agents = [x.split()[0] for x in timeline if x.startswith("  ") and x.split()]
        assert agents.index("researcher") < agents.index("writer")
        assert "Not stored" in lines
