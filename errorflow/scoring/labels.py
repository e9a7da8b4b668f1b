"""The labelling rule's two questions about a message, asked once for the scorer
(`score.label_message`, `score.score_trial`) and the genealogy alike:

- touched: a failure its sender reports (`trace.failures`) is on it, or on an ancestor
  through `derived_from`;
- silent: it says nothing about a failure: ok, full confidence, no errors, flags, gaps
  or abstention, every claim certain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from errorflow.protocol import topics
from errorflow.protocol.claims import FinalAnswer
from errorflow.protocol.envelope import Envelope, Kind, Status
from errorflow.protocol.result import ResultPayload, failures_of


def is_task(env: Envelope) -> bool:
    """The runner's task (it carries a prompt, no answer)."""
    return env.kind is Kind.TASK and env.sender == topics.RUNNER


def answer_of(env: Envelope) -> FinalAnswer:
    """The answer a message carries (the runner's task: none)."""
    return FinalAnswer() if is_task(env) else ResultPayload.from_wire(env.payload).answer


def silent(env: Envelope, answer: FinalAnswer | None = None) -> bool:
    """The message says nothing about a failure. `answer`: `answer_of(env)`, if at hand."""
    answer = answer_of(env) if answer is None else answer
    return not (
        env.status is not Status.OK
        or bool(env.errors)
        or env.confidence < 1.0
        or bool(answer.flags)
        or bool(answer.unresolved)
        or answer.abstained
        or any(not c.certain for c in answer.claims)
    )


def touched_ids(messages: Sequence[Envelope]) -> dict[str, bool]:
    """Which messages a failure touched: a reported failure here or in an ancestor."""
    return reached_ids(messages, {m.id for m in messages if failures_of(m.payload)})


def reached_ids(messages: Sequence[Envelope], sources: set[str]) -> dict[str, bool]:
    """Which messages are `sources` or derived from one, through `derived_from`."""
    by_id = {m.id: m for m in messages}
    reached: dict[str, bool] = {}
    for m in messages:
        _reaches(m, by_id, sources, reached)
    return reached


def _reaches(
    m: Envelope, by_id: Mapping[str, Envelope], sources: set[str], reached: dict[str, bool]
) -> bool:
    # A module function, not a closure calling itself: that closure would be a reference
    # cycle holding the trial's envelopes until the garbage collector ran.
    if m.id not in reached:
        reached[m.id] = False  # provenance is acyclic; this guards bad input
        upstream = any(
            _reaches(by_id[d], by_id, sources, reached) for d in m.derived_from if d in by_id
        )
        reached[m.id] = m.id in sources or upstream
    return reached[m.id]
