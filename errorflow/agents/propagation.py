"""Propagation, the experiment's switch: what an agent's result says about failures.

Pure: from the final answer, the agent's failures, why its loop stopped and what its
inputs said, decide the result's status, confidence and the errors that travel on.

- explicit: own failures travel with hops 0 and origin = this agent, upstream ones with
  their origin and hops + 1; errors cap confidence at 0.4, flags or unresolved needs at
  0.6, an abstention at 0.2, and a result is never more confident than its inputs;
- implicit (the common anti-pattern): every result says `ok` with full confidence and
  no errors, and a stopped agent reports "nothing found" as if it were certain.

Which failures count at all is decided here too: a failure is recovered (not reported)
when the same tool also succeeded in the trial and every need that tool serves ended
with a certain claim; model failures are never recovered.

An infrastructure fault (the agent's real model server gone, its key refused, its
model missing) is not the experiment: the agent's result says so (failure code
`infra_fault`, the reason as the answer's text) and every agent downstream passes it on
without calling its model, so the trial ends at once and the scorer leaves it out.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from errorflow.core.taxonomy import RETRYABLE, ErrorCode
from errorflow.models.backend import NeedView
from errorflow.policies.classify import Failure
from errorflow.protocol.claims import Claim, FinalAnswer
from errorflow.protocol.envelope import Status, WireError
from errorflow.protocol.stop import StopReason

Propagation = Literal["explicit", "implicit"]

#: Confidence caps under explicit propagation (README, "How failures are handled").
ERRORS_CAP = 0.4
FLAGS_CAP = 0.6
ABSTAIN_CAP = 0.2


class InputReport(Protocol):
    """What an input message says about failures (an `Envelope` is one)."""

    @property
    def errors(self) -> list[WireError]: ...

    @property
    def confidence(self) -> float: ...


@dataclass(frozen=True)
class Verdict:
    status: Status
    confidence: float
    errors: list[WireError]


def propagate(
    mode: Propagation,
    *,
    agent: str,
    final: FinalAnswer,
    failures: Sequence[Failure],
    stopped: StopReason | None,
    inputs: Sequence[InputReport],
) -> Verdict:
    """The status, confidence and errors of `agent`'s result. `failures` are the
    unrecovered ones (see `unrecovered`)."""
    if mode == "implicit":
        return Verdict(Status.OK, 1.0, [])
    errors = own_errors(agent, failures) + upstream_errors(inputs)
    upstream = min((env.confidence for env in inputs), default=1.0)
    return Verdict(status(final, errors, stopped), confidence(final, errors, upstream), errors)


#: The statuses from best to worst.
_STATUS_ORDER = (Status.OK, Status.PARTIAL_FAILURE, Status.FAILED)


def lowered(verdict: Verdict, status: str | None, confidence: float | None) -> Verdict:
    """`verdict` with a status and confidence the agent stated of its own result
    (a python agent's): the worse status and the lower confidence win, so an agent can
    say less than errorflow derived, never more."""
    worst = verdict.status
    if status is not None and _STATUS_ORDER.index(Status(status)) > _STATUS_ORDER.index(worst):
        worst = Status(status)
    conf = verdict.confidence if confidence is None else min(verdict.confidence, confidence)
    return Verdict(worst, round(conf, 3), verdict.errors)


def own_errors(agent: str, failures: Sequence[Failure]) -> list[WireError]:
    """This agent's failures as they travel: one per (tool, code), hops 0."""
    return [
        WireError(
            code=f.code,
            tool=f.tool,
            message=short(f),
            retryable=f.code in RETRYABLE,
            retry_after_s=f.retry_after_s,
            suggestion=None,
            origin=agent,
            hops=0,
        )
        for f in dedupe(failures)
    ]


def upstream_errors(inputs: Sequence[InputReport]) -> list[WireError]:
    """The inputs' errors carried on: origin kept, one hop further."""
    return [e.model_copy(update={"hops": e.hops + 1}) for env in inputs for e in env.errors]


def status(final: FinalAnswer, errors: Sequence[WireError], stopped: StopReason | None) -> Status:
    """failed: nothing claimed and something went wrong; partial_failure: claims, but
    with errors, gaps, flags or a stop; ok otherwise."""
    stop = stopped is not None
    if not final.claims and (errors or stop or final.unresolved or final.abstained):
        return Status.FAILED
    if errors or final.unresolved or final.abstained or final.flags or stop:
        return Status.PARTIAL_FAILURE
    return Status.OK


def confidence(final: FinalAnswer, errors: Sequence[WireError], upstream: float) -> float:
    """Errors cap confidence at 0.4, flags or unresolved needs at 0.6, an abstention at
    0.2; never above the inputs'."""
    conf = 1.0
    if final.flags or final.unresolved:
        conf = min(conf, FLAGS_CAP)
    if errors:
        conf = min(conf, ERRORS_CAP)
    if final.abstained:
        conf = min(conf, ABSTAIN_CAP)
    return round(min(conf, upstream), 3)


def short(f: Failure) -> str:
    """The error's message on the wire: tool and class, never the raw text."""
    return f"{f.tool}: {f.code.value}" + (f" after {f.attempts} attempts" if f.attempts > 1 else "")


def dedupe(failures: Sequence[Failure]) -> list[Failure]:
    """The first failure of each (tool, code): a tool failing the same way twice is one
    error downstream."""
    seen: set[tuple[str, str]] = set()
    out = []
    for f in failures:
        key = (f.tool, f.code.value)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


# -- which failures are reported ------------------------------------------------------


def open_tools(needs: Sequence[NeedView], own: Sequence[NeedView], final: FinalAnswer) -> set[str]:
    """Tools serving a need the agent answers for (`own`) that the final answer leaves
    without a certain claim, or any need the answer marks unresolved."""
    certain = {c.key for c in final.claims if c.certain}
    return {
        tool
        for n in own
        if n.id not in certain and not any(k.startswith(n.id + ".") for k in certain)
        for tool in (n.tool, *n.sources)
    } | {
        tool
        for n in needs
        if n.id in final.unresolved or any(u.startswith(n.id + ".") for u in final.unresolved)
        for tool in (n.tool, *n.sources)
    }


def unrecovered(
    failures: Sequence[Failure], succeeded_tools: Collection[str], open_: Collection[str]
) -> list[Failure]:
    """The failures to report: model failures, failures of a tool that never succeeded,
    and failures of a tool whose needs are still open."""
    return [
        f for f in failures if f.tool == "model" or f.tool not in succeeded_tools or f.tool in open_
    ]


def fallback_answer(
    mode: Propagation, own: Sequence[NeedView], stopped: StopReason | None
) -> FinalAnswer:
    """The answer of a loop that ended without one (policy stop, model failure)."""
    answer = FinalAnswer(text=f"stopped: {None if stopped is None else stopped.wire}")
    if mode == "implicit":
        # The anti-pattern again: a stopped agent reports "nothing found", as certain.
        answer.claims = [Claim(n.id, None, True) for n in own]
    else:
        answer.unresolved = [n.id for n in own]
    return answer


# -- infrastructure faults ------------------------------------------------------------

#: Why a result carries an infrastructure fault (its `stopped`).
INFRA_STOP = StopReason(ErrorCode.INFRA_FAULT)


def infra_failure(failures: Sequence[Failure]) -> Failure | None:
    """The model failure that was the infrastructure's, if the loop had one."""
    return next((f for f in failures if f.code is ErrorCode.INFRA_FAULT), None)


def infra_answer(reason: str, needs: Sequence[NeedView]) -> FinalAnswer:
    """The answer of an agent whose trial the infrastructure ended: nothing claimed,
    and the reason (which names the server, and never reaches a model)."""
    return FinalAnswer(abstained=True, unresolved=[n.id for n in needs], text=reason)


def infra_text(agent: str, failure: Failure) -> str:
    return f"infra_fault at {agent}: {failure.raw}"
