"""Scoring: every message labelled clean / contained / contaminated; every trial an outcome.

A message is
- clean: no failure touched it (none in its sender's own tool calls, none upstream in
  its provenance) and every claim it states as certain is true;
- contained: a failure touched it and it says so (status, errors, lowered confidence,
  flags, an unresolved need or an abstention), with no false claim stated as certain;
- contaminated: it states a false or unsupported claim as certain, or a failure touched
  it and it says nothing (ok, full confidence, no flags): the failure was dropped;
  unless its answer is whole and true (every need answered, every claim true): then the
  failure was repaired on the way (a checker re-fetched), and it is clean, `recovered`.

A trial succeeds when its final messages are clean and answer every need correctly;
it is contaminated when any final message is; otherwise it is a contained failure. Each
trial also carries its partial credit (per fact: right, wrong or abstained) and whether
a fault struck it: a success a fault struck is `recovered` (errorflow.scoring.credit).
Contamination depth counts the contaminated messages along the longest provenance
chain that ends in a final message: 1 = only the message next to the failing tool.

A trial in which a message reports an infrastructure fault (a real model server that
could not be reached, refused the key, had no such model) is `infra_fault`: it measured
nothing, so it gets no labels and no other outcome, and summaries leave it out of every
rate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from pydantic import JsonValue

from errorflow.core.costs import Costs
from errorflow.core.redact import redact_obj
from errorflow.protocol.claims import FinalAnswer
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.protocol.result import (
    Readings,
    ResultPayload,
    infra_reason,
    read_all,
    round_of,
)
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.credit import fact_credit, struck
from errorflow.scoring.labels import silent, touched_ids
from errorflow.world.ground_truth import need_truths

#: The reason of a message a failure touched whose answer is nonetheless whole and true.
RECOVERED = "recovered: every need answered and true despite an upstream failure"


class Label(StrEnum):
    CLEAN = "clean"
    CONTAINED = "contained"
    CONTAMINATED = "contaminated"


class Outcome(StrEnum):
    SUCCESS = "success"
    CONTAINED = "contained"
    CONTAMINATED = "contaminated"
    BUS_FAULT = "bus_fault"
    #: errorflow's own infrastructure failed: not an outcome of the experiment.
    INFRA_FAULT = "infra_fault"


@dataclass(frozen=True)
class MessageLabel:
    message_id: str
    sender: str
    label: Label
    reason: str
    touched: bool


@dataclass
class TrialScore:
    trial: int
    outcome: Outcome
    depth: int
    labels: list[MessageLabel] = field(default_factory=list)
    costs: Costs = field(default_factory=Costs)
    reason: str = ""
    #: Policy decisions by agent (errorflow.agents.policy_tally counts), summed.
    policy: dict[str, dict[str, float]] = field(default_factory=dict)
    #: Per fact of the ground truth: right / wrong / abstained in the final answer
    #: (errorflow.scoring.credit); empty without a final answer.
    credit: dict[str, str] = field(default_factory=dict)
    #: A fault struck the trial (a reported failure, or an injected tool fault fired).
    struck: bool = False

    @property
    def recovered(self) -> bool:
        """A success although a fault struck the trial."""
        return self.outcome is Outcome.SUCCESS and self.struck


class Truth:
    """Ground truth of a scenario's task, by need id."""

    def __init__(self, scenario: Scenario) -> None:
        self.values: dict[str, JsonValue] = {}
        #: Each need's answer as its tool gives it (before redaction), by need id: what
        #: the agents of the run's process are given rather than work it out again.
        self.answers: Mapping[str, JsonValue] = MappingProxyType(need_truths(scenario))
        answers = self.answers
        for n in scenario.task.needs:
            # The model only ever sees tool results through redaction; a correct claim
            # is one that matches what it could have seen.
            value = redact_obj(answers[n.id])
            if scenario.is_batch_tool(n.tool) and isinstance(value, dict):
                # a batch is answered item by item: one fact per document
                self.values.update({f"{n.id}.{item}": v for item, v in value.items()})
            else:
                self.values[n.id] = value

    def is_true(self, key: str, value: object) -> bool:
        if key not in self.values:
            return False
        expected = self.values[key]
        if isinstance(expected, list) and isinstance(value, list):
            return sorted(map(str, expected)) == sorted(map(str, value))
        if isinstance(expected, int | float) and isinstance(value, int | float):
            return abs(float(expected) - float(value)) <= 1e-9 * max(1.0, abs(float(expected)))
        return bool(expected == value)


def label_message(
    env: Envelope, truth_: Truth, touched: bool, payload: ResultPayload | None = None
) -> MessageLabel:
    """The labelling rule (see the module's docstring; `touched` and silence as
    errorflow.scoring.labels decides them); `payload`: `env`'s, when read already."""
    answer = (payload or ResultPayload.from_wire(env.payload)).answer
    false = [c.key for c in answer.claims if c.certain and not truth_.is_true(c.key, c.value)]
    if false:
        return MessageLabel(
            env.id,
            env.sender,
            Label.CONTAMINATED,
            f"false claim(s) stated as certain: {', '.join(false)}",
            touched,
        )
    if touched and silent(env, answer):
        if _answers_all(answer, truth_):
            # Every need answered, every claim true: the failure upstream was repaired
            # (a checker re-fetched what it needed), not dropped into the answer.
            return MessageLabel(env.id, env.sender, Label.CLEAN, RECOVERED, touched)
        return MessageLabel(
            env.id, env.sender, Label.CONTAMINATED, "upstream failure dropped silently", touched
        )
    if touched:
        return MessageLabel(env.id, env.sender, Label.CONTAINED, "failure reported", touched)
    return MessageLabel(env.id, env.sender, Label.CLEAN, "", touched)


def score_trial(
    scenario: Scenario,
    truth_: Truth,
    trial: int,
    messages: list[Envelope],
    readings: Readings | None = None,
) -> TrialScore:
    """Label a trial's result messages and decide its outcome (pure; `readings`: where
    the payloads read are kept, for the trial's root cause to read them again)."""
    # Arrival order depends on the transport; labels must not (same seed, same events).
    results = sorted(
        (m for m in messages if m.kind is Kind.RESULT),
        key=lambda m: (round_of(m.payload), m.sender, m.recipient),
    )
    # Provenance runs through results and through revision requests (tasks an agent
    # sends back); the runner's own tasks carry no claims and start every chain.
    by_id = {m.id: m for m in messages if m.kind in (Kind.RESULT, Kind.TASK)}
    # Each message carries what its sender spent on it; by id, a message counts once.
    payloads = read_all(by_id.values(), readings)
    costs = Costs.total(p.costs or Costs() for p in payloads.values())
    policy = policy_counts((by_id[mid].sender, p) for mid, p in payloads.items())
    infra = infra_reason(results)
    if infra is not None:
        return TrialScore(trial, Outcome.INFRA_FAULT, 0, [], costs, reason=infra, policy=policy)
    touched = touched_ids(list(by_id.values()))
    labels = {m.id: label_message(m, truth_, touched[m.id], payloads[m.id]) for m in results}
    finals = [m for m in results if m.recipient == "runner"]
    score = TrialScore(trial, Outcome.CONTAINED, 0, list(labels.values()), costs, policy=policy)
    if not finals:
        score.outcome, score.reason = Outcome.BUS_FAULT, "no final result"
        return score
    final_labels = [labels[m.id] for m in finals]
    score.struck = struck(scenario, trial, [payloads[m.id] for m in results])
    credit = fact_credit((payloads[m.id].answer for m in finals), truth_)
    score.credit = {key: verdict.value for key, verdict in credit.items()}
    if any(lb.label is Label.CONTAMINATED for lb in final_labels):
        score.outcome = Outcome.CONTAMINATED
        score.depth = max(_depth(m, by_id, labels) for m in finals)
        score.reason = "; ".join(lb.reason for lb in final_labels if lb.reason)
    elif all(lb.label is Label.CLEAN for lb in final_labels) and all(
        _answers_all(payloads[m.id].answer, truth_) for m in finals
    ):
        score.outcome = Outcome.SUCCESS
    else:
        score.outcome = Outcome.CONTAINED
        score.reason = "; ".join(lb.reason for lb in final_labels if lb.reason) or "incomplete"
    return score


def trial_policy(messages: Iterable[Envelope]) -> dict[str, dict[str, float]]:
    """A trial's policy decisions from its tasks and results, as `score_trial` sums them."""
    by_id = {m.id: m for m in messages if m.kind in (Kind.RESULT, Kind.TASK)}
    payloads = read_all(by_id.values(), None)
    return policy_counts((by_id[mid].sender, p) for mid, p in payloads.items())


def policy_counts(sent: Iterable[tuple[str, ResultPayload]]) -> dict[str, dict[str, float]]:
    """The policy decisions the messages report (`trace.policy`), summed by sender."""
    out: dict[str, dict[str, float]] = {}
    for sender, payload in sent:
        mine = out.setdefault(sender, {})
        for key, value in payload.policy.items():
            mine[key] = round(mine.get(key, 0.0) + value, 6)
    return {agent: counts for agent, counts in sorted(out.items()) if counts}


def _answers_all(answer: FinalAnswer, truth_: Truth) -> bool:
    """Every need of the task answered with a true claim stated as certain."""
    got = {c.key for c in answer.claims if c.certain and truth_.is_true(c.key, c.value)}
    return set(truth_.values) <= got


def _depth(m: Envelope, by_id: dict[str, Envelope], labels: dict[str, MessageLabel]) -> int:
    """Contaminated results along the longest provenance chain ending at `m`."""
    here = 1 if m.id in labels and labels[m.id].label is Label.CONTAMINATED else 0
    if m.kind is Kind.RESULT and not here:
        return 0
    parents = [by_id[d] for d in m.derived_from if d in by_id]
    return here + max((_depth(p, by_id, labels) for p in parents), default=0)
