"""Failed trials in the Who&When layout (Zhang et al., "Which Agent Causes Task Failures
and When?", ICML 2025), so failure-attribution methods can be scored against ground
truth on errorflow runs.

One JSON object per failed trial, with the fields of the dataset's Algorithm-Generated
half: `is_correct` (false), `question`, `question_ID`, `ground_truth`, `history` (a list
of steps `{"role", "name", "content"}`, `name` the agent), `mistake_agent`,
`mistake_step` (an index into `history`), `mistake_reason` and `system_prompt` (by
agent). errorflow's own facts go under `errorflow` (the outcome, the depth, the
origins, who dropped the failure, each step's message and label), which the dataset's
readers ignore.

The history, step by step: the runner's task (step 0, name `runner`); then, in the
order the agents worked, each model turn that called tools (its calls, their outcome as
the tool-call events record it and what the model got back), and each agent's message
(status, confidence, errors, claims, flags). The ground truth is the trial's stored
root cause: the mistake agent is the primary origin's agent, the mistake step the turn
whose tool call failed first (or, for a model that stated a false claim with no failure
behind it, that message).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, TypedDict

from errorflow.scoring.genealogy_types import Genealogy, Invocation, MessageNode
from errorflow.scoring.root_cause import Origin
from errorflow.scoring.trial_trace import TrialTrace


class HistoryStep(TypedDict):
    role: str
    name: str
    content: str


class StepFacts(TypedDict):
    """What errorflow knows about one history step (under `errorflow.steps`)."""

    step: int
    name: str
    kind: str  # task | turn | message
    invocation: int | None
    turn: int | None  # the model turn within the invocation
    message_id: str | None
    label: str | None
    label_reason: str


def _args(args: Mapping[str, Any]) -> str:
    return json.dumps(args, ensure_ascii=False, sort_keys=True, default=str)


def _turn_text(inv: Invocation, turn: int, g: Genealogy) -> str:
    lines = [f"[{inv.agent}, turn {turn}]"]
    for d in g.timeline:
        if d.invocation == inv.index and d.step == turn and d.kind == "model_error":
            lines.append(d.text)
    for c in inv.tool_calls:
        if c.step != turn:
            continue
        if c.ok and c.code is None:
            result = f"ok after {c.attempts} attempt(s)"
        else:
            http = f" (HTTP {c.http_status})" if c.http_status else ""
            error = f": {c.error}" if c.error else ""
            result = f"{c.code}{http} after {c.attempts} attempt(s){error}"
        lines.append(f"call {c.tool}({_args(c.args)}) [{c.call_id}] -> {result}")
        lines.append(f"  the model got back: {c.shown}")
    return "\n".join(lines)


def _message_text(m: MessageNode) -> str:
    lines = [f"[{m.sender} -> {m.recipient}, {m.kind}] status {m.status}, "
             f"confidence {m.confidence:.2f}"]  # fmt: skip
    for e in m.errors:
        lines.append(f"error {e.code} from {e.origin} (tool {e.tool}, hops {e.hops}): {e.message}")
    for c in m.claims:
        certain = "certain" if c.certain else "uncertain"
        lines.append(f"claim {c.key} = {json.dumps(c.value, default=str)} ({certain})")
    lines += [f"flag: {f}" for f in m.flags]
    lines += [f"unresolved: {u}" for u in m.unresolved]
    if m.abstained:
        lines.append("abstained")
    if m.text:
        lines.append(f"text: {m.text}")
    return "\n".join(lines)


def _steps(t: TrialTrace) -> Iterator[tuple[HistoryStep, StepFacts]]:
    g = t.genealogy
    needs = ", ".join(t.needs)
    task = HistoryStep(role="user", name="runner", content=f"{t.task}\nNeeds: {needs}")
    yield task, _facts("runner", "task", None, None, None, None, "")
    nodes = g.by_id()
    for inv in g.invocations:
        turns = sorted({c.step for c in inv.tool_calls})
        for turn in turns:
            step = HistoryStep(role="assistant", name=inv.agent, content=_turn_text(inv, turn, g))
            yield step, _facts(inv.agent, "turn", inv.index, turn, None, None, "")
        for mid in inv.outputs:
            m = nodes[mid]
            step = HistoryStep(role="assistant", name=inv.agent, content=_message_text(m))
            yield step, _facts(inv.agent, "message", inv.index, None, m.id, m.label, m.reason)


def _facts(
    name: str,
    kind: str,
    invocation: int | None,
    turn: int | None,
    message_id: str | None,
    label: str | None,
    reason: str,
) -> StepFacts:
    return StepFacts(step=-1, name=name, kind=kind, invocation=invocation, turn=turn,
                     message_id=message_id, label=label, label_reason=reason)  # fmt: skip


def mistake_step(origin: Origin, facts: list[StepFacts]) -> int:
    """The history index of the origin: the turn whose call failed first, else the
    message it left the agent by."""
    for f in facts:
        if (
            f["kind"] == "turn"
            and f["invocation"] == origin.invocation
            and (f["turn"] == origin.step)
        ):
            return f["step"]
    for f in facts:
        if f["message_id"] == origin.message_id:
            return f["step"]
    return next((f["step"] for f in facts if f["name"] == origin.agent), 0)


def _reason(t: TrialTrace, origin: Origin) -> str:
    rc = t.root_cause
    assert rc is not None
    dropped = ", ".join(dict.fromkeys(f"{d.agent} ({d.how})" for d in rc.dropped)) or "nobody"
    depth = f"; contamination depth {t.depth}" if t.outcome == "contaminated" else ""
    return f"{origin.detail}; dropped by {dropped}; outcome {t.outcome}{depth}"


def record(t: TrialTrace, truth: Mapping[str, Any], prompts: Mapping[str, str]) -> dict[str, Any]:
    """One failed trial as a Who&When record (`truth`: the needs' true values;
    `prompts`: each agent's system prompt)."""
    rc = t.root_cause
    if rc is None or rc.primary is None:
        raise ValueError(f"trial {t.trial} did not fail: it has no mistake to attribute")
    history, facts = [], []
    for i, (step, fact) in enumerate(_steps(t)):
        history.append(step)
        fact["step"] = i
        facts.append(fact)
    origin = rc.primary
    return {
        "is_correct": False,
        "question": t.task,
        "question_ID": f"{t.run_id}-t{t.trial}",
        "ground_truth": json.dumps(dict(truth), ensure_ascii=False, default=str),
        "history": history,
        "mistake_agent": origin.agent,
        "mistake_step": mistake_step(origin, facts),
        "mistake_reason": _reason(t, origin),
        "system_prompt": dict(prompts),
        "errorflow": {
            "run_id": t.run_id,
            "scenario": t.scenario,
            "trial": t.trial,
            "propagation": t.propagation,
            "outcome": t.outcome,
            "depth": t.depth,
            "reason": t.reason,
            "root_cause": rc.to_wire(),
            "steps": facts,
        },
    }
