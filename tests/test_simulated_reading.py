"""models/simulated_reading.py: how the simulated reviewer reads a report against its
sources."""

from __future__ import annotations

from pathlib import Path

from errorflow import api

REVIEW = """\
name: review
seed: 7
trials: 3
world: {metrics: {rev.q3: 1000}}
tools:
  kpi_cache: {kind: metric_store, faults: [{kind: stale, first_n: 1}]}
  kpi_origin: {kind: metric_store}
agents:
  analyst: {role: researcher, tools: [kpi_cache], sends_to: [checker]}
  checker:
    role: reviewer
    tools: [kpi_origin]
    returns_to: analyst
    max_revisions: 2
    sends_to: [writer]
  writer: {role: writer}
task:
  prompt: Q3 revenue.
  needs:
    - {id: revenue, tool: kpi_cache, sources: [kpi_origin], wording: Q3 revenue, value: rev.q3}
"""


def test_a_claim_sent_back_twice_is_flagged_once(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(REVIEW)
    result = api.run(api.load_scenario(path))
    reviewed = [
        m.payload["answer"]["flags"]
        for messages in result.raw.messages.values()
        for m in messages
        if m.sender == "checker" and m.kind.value == "result"
    ]
    assert any("revenue: contradicted by the source; sent back" in f for f in reviewed)
    assert all(len(flags) == len(set(flags)) for flags in reviewed), reviewed
