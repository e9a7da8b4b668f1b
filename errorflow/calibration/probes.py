"""The probe families: one small conversation per situation the simulated model decides
in, built as the agents build a real model's request (the behaviour's system prompt,
the task turn, the tool schema, errorflow's own observations and upstream messages),
so that a real backend renders a probe exactly as it renders a run.

Each probe is seeded (errorflow.calibration.material): its subject, wording, values and
option order vary; the situation does not. A probe whose tool calls the model must make
itself starts at the task; a probe about what the model does next after a call starts
with that call already made (an assistant turn) and its observation.

| family | situation | parameters |
|---|---|---|
| first_call | a researcher's first call, the identifier not given | p_use_task_wording, p_guess_identifier, p_drop_required_arg, p_call_unknown_tool |
| transient | its call failed with a transient error | p_self_retry_transient |
| wrong_arg_with_options | its argument was refused, the valid options listed | p_repair_with_options |
| wrong_arg_without_options | a typo in the identifier the task gives was refused, no options | p_repair_without_options |
| missing_arg | its call left out the required argument | p_repair_missing_arg |
| empty_result | its call answered with an empty result | p_flag_empty |
| empty_upstream | a writer; upstream says ok and states the value as empty | p_fabricate_on_empty |
| missing_upstream | a writer; upstream says ok and leaves the fact out | p_fabricate_on_missing |
| failed_upstream | a writer; upstream reports partial_failure, errors, low confidence | p_heed_upstream |
| disagreeing_peer | a discussion round: its own answer against two peers' | p_keep_own_evidence |
"""  # noqa: E501

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import JsonValue

from errorflow.calibration.material import MEMBERS, Draw, draw, mangled
from errorflow.core.seeding import stream
from errorflow.core.taxonomy import ErrorCode
from errorflow.models.backend import (
    AssistantTurn,
    ModelRequest,
    NeedView,
    ObservationTurn,
    Stance,
    TaskTurn,
    ToolCall,
    ToolDef,
    Turn,
    UpstreamTurn,
)
from errorflow.policies.classify import ArgumentProblem, Failure
from errorflow.policies.observation import observe_failure, observe_success
from errorflow.protocol.claims import Claim, FinalAnswer
from errorflow.protocol.envelope import WireError
from errorflow.scenario.spec.behaviour import BEHAVIOURS

#: Each family and the parameters its replies estimate, in the order of the profile.
FAMILIES: dict[str, tuple[str, ...]] = {
    "first_call": (
        "p_use_task_wording",
        "p_guess_identifier",
        "p_drop_required_arg",
        "p_call_unknown_tool",
    ),
    "transient": ("p_self_retry_transient",),
    "wrong_arg_with_options": ("p_repair_with_options",),
    "wrong_arg_without_options": ("p_repair_without_options",),
    "missing_arg": ("p_repair_missing_arg",),
    "empty_result": ("p_flag_empty",),
    "empty_upstream": ("p_fabricate_on_empty",),
    "missing_upstream": ("p_fabricate_on_missing",),
    "failed_upstream": ("p_heed_upstream",),
    "disagreeing_peer": ("p_keep_own_evidence",),
}
#: The parameter each family is named for (its row in the table above).
FAMILY_OF = {p: family for family, params in FAMILIES.items() for p in params}
RESEARCHER, WRITER, UPSTREAM = "researcher", "writer", "collector"


@dataclass(frozen=True)
class Probe:
    """One conversation, and what its classification needs to know."""

    family: str
    index: int
    request: ModelRequest
    material: Draw
    #: The identifier the task gives, if it gives one.
    given: str | None = None
    #: The value the scripted call sent (refused), if there is one.
    sent: JsonValue = None
    #: The valid options the observation listed.
    options: tuple[str, ...] = ()
    #: The need key the classification looks at.
    key: str = ""
    #: What a repeated call to the probe's tool observes (multi-turn families).
    repeat: Mapping[str, JsonValue] = field(default_factory=dict)
    #: The classification wants a final answer: a reply with calls gets their
    #: observations and is asked again (at most `MAX_TURNS` replies).
    wants_final: bool = False

    @property
    def tool(self) -> str:
        return self.material.subject.tool

    @property
    def arg(self) -> str:
        return self.material.subject.arg


def _tool(d: Draw) -> ToolDef:
    s = d.subject
    schema: dict[str, JsonValue] = {
        "type": "object",
        "properties": {s.arg: {"type": "string", "description": f"the {s.arg}"}},
        "required": [s.arg],
    }
    return ToolDef(s.tool, s.description, schema)


def _need(d: Draw, *, given: bool, fact_of: str = "fact") -> NeedView:
    f = d.fact if fact_of == "fact" else d.other
    return NeedView(
        id=f.key,
        tool=d.subject.tool,
        arg=d.subject.arg,
        wording=f.wording,
        identifier=f.identifier if given else None,
        meant=f.identifier,
        shape="number",
    )


def _researcher(d: Draw, turns: list[Turn]) -> ModelRequest:
    system = BEHAVIOURS["gather"].instructions
    return ModelRequest(RESEARCHER, "researcher", system, turns, [_tool(d)], "gather")


def _writer(turns: list[Turn], agent: str = WRITER, stance: Stance | None = None) -> ModelRequest:
    system = BEHAVIOURS["synthesise"].instructions
    return ModelRequest(agent, "writer", system, turns, [], "synthesise", stance or Stance())


def _failure(d: Draw, code: ErrorCode, **facts: object) -> dict[str, JsonValue]:
    raw = facts.pop("raw", f"{d.subject.tool} failed")
    failure = Failure(code, d.subject.tool, str(raw), **facts)  # type: ignore[arg-type]
    return observe_failure(failure, "actionable", tell_class=True)


def _after_call(d: Draw, sent: JsonValue, observation: Mapping[str, JsonValue]) -> list[Turn]:
    """The task (identifier given), the call already made with `sent`, its observation."""
    need = _need(d, given=True)
    args: dict[str, JsonValue] = {} if sent is None else {d.subject.arg: sent}
    call = ToolCall(f"{need.id}#0", d.subject.tool, args)
    return [
        TaskTurn(d.prompt, [need]),
        AssistantTurn([call]),
        ObservationTurn(call.id, d.subject.tool, observation),
    ]


def first_call(index: int, d: Draw, rng: random.Random) -> Probe:
    turns: list[Turn] = [TaskTurn(d.prompt, [_need(d, given=False)])]
    return Probe("first_call", index, _researcher(d, turns), d, key=d.fact.key)


def transient(index: int, d: Draw, rng: random.Random) -> Probe:
    code = rng.choice([ErrorCode.TRANSIENT, ErrorCode.TIMEOUT])
    obs = _failure(d, code, raw="503 Service Unavailable")
    turns = _after_call(d, d.fact.identifier, obs)
    return Probe("transient", index, _researcher(d, turns), d, given=d.fact.identifier,
                 sent=d.fact.identifier, key=d.fact.key)  # fmt: skip


def wrong_arg_with_options(index: int, d: Draw, rng: random.Random) -> Probe:
    """The first call passed the task's wording; the error lists the valid values."""
    need = _need(d, given=False)
    sent = d.fact.wording
    problem = ArgumentProblem(field=d.subject.arg, constraint="one of the listed values",
                              received=sent)  # fmt: skip
    obs = _failure(d, ErrorCode.INVALID_ARGS, argument=problem, options=d.options)
    call = ToolCall(f"{need.id}#0", d.subject.tool, {d.subject.arg: sent})
    turns: list[Turn] = [
        TaskTurn(d.prompt, [need]),
        AssistantTurn([call]),
        ObservationTurn(call.id, d.subject.tool, obs),
    ]
    return Probe("wrong_arg_with_options", index, _researcher(d, turns), d, sent=sent,
                 options=d.options, key=d.fact.key)  # fmt: skip


def wrong_arg_without_options(index: int, d: Draw, rng: random.Random) -> Probe:
    """The call carried a typo of the identifier the task gives; no options listed."""
    sent = mangled(d.fact.identifier, rng)
    problem = ArgumentProblem(field=d.subject.arg, constraint="a known value", received=sent)
    obs = _failure(d, ErrorCode.INVALID_ARGS, argument=problem)
    turns = _after_call(d, sent, obs)
    return Probe("wrong_arg_without_options", index, _researcher(d, turns), d,
                 given=d.fact.identifier, sent=sent, key=d.fact.key)  # fmt: skip


def missing_arg(index: int, d: Draw, rng: random.Random) -> Probe:
    problem = ArgumentProblem(field=d.subject.arg, constraint="required", missing=True)
    obs = _failure(d, ErrorCode.INVALID_ARGS, argument=problem)
    turns = _after_call(d, None, obs)
    return Probe("missing_arg", index, _researcher(d, turns), d, given=d.fact.identifier,
                 key=d.fact.key)  # fmt: skip


def empty_result(index: int, d: Draw, rng: random.Random) -> Probe:
    empty: JsonValue = rng.choice([[], None])
    obs = observe_success(d.subject.tool, empty)
    turns = _after_call(d, d.fact.identifier, obs)
    return Probe("empty_result", index, _researcher(d, turns), d, given=d.fact.identifier,
                 sent=d.fact.identifier, key=d.fact.key, repeat=obs, wants_final=True)  # fmt: skip


def _upstream(
    answer: FinalAnswer,
    status: str = "ok",
    confidence: float = 1.0,
    errors: list[dict[str, JsonValue]] | None = None,
    sender: str = UPSTREAM,
) -> UpstreamTurn:
    return UpstreamTurn(sender, status, confidence, errors or [], answer)


def empty_upstream(index: int, d: Draw, rng: random.Random) -> Probe:
    empty: JsonValue = rng.choice([[], None])
    answer = FinalAnswer(claims=[Claim(d.fact.key, empty, True)], text="Found nothing.")
    turns: list[Turn] = [TaskTurn(d.prompt, [_need(d, given=True)]), _upstream(answer)]
    return Probe("empty_upstream", index, _writer(turns), d, key=d.fact.key, wants_final=True)


def _two_needs(d: Draw) -> TaskTurn:
    return TaskTurn(d.prompt, [_need(d, given=True), _need(d, given=True, fact_of="other")])


def missing_upstream(index: int, d: Draw, rng: random.Random) -> Probe:
    """Upstream answered the other need and silently left this one out."""
    found = Claim(d.other.key, d.other_value, True)
    answer = FinalAnswer(claims=[found], text=f"Found {d.other.key}.")
    turns: list[Turn] = [_two_needs(d), _upstream(answer)]
    return Probe("missing_upstream", index, _writer(turns), d, key=d.fact.key, wants_final=True)


def failed_upstream(index: int, d: Draw, rng: random.Random) -> Probe:
    code = rng.choice([ErrorCode.TRANSIENT, ErrorCode.TIMEOUT, ErrorCode.PERMISSION_DENIED])
    error = WireError(code=code, tool=d.subject.tool, message=f"{d.subject.tool} failed ({code})",
                      origin=UPSTREAM, hops=1)  # fmt: skip
    found = Claim(d.other.key, d.other_value, True)
    answer = FinalAnswer(claims=[found], unresolved=[d.fact.key],
                         text=f"Found {d.other.key}. Could not get {d.fact.key}.")  # fmt: skip
    up = _upstream(answer, "partial_failure", rng.choice([0.2, 0.3, 0.4]),
                   [error.model_dump(mode="json")])  # fmt: skip
    turns: list[Turn] = [_two_needs(d), up]
    return Probe("failed_upstream", index, _writer(turns), d, key=d.fact.key, wants_final=True)


def disagreeing_peer(index: int, d: Draw, rng: random.Random) -> Probe:
    """A discussion round: its own answer (from its own tool) against two peers that
    agree on another value; the request is the one a discussion round makes."""
    me, *peers = MEMBERS
    own = FinalAnswer(claims=[Claim(d.fact.key, d.value, True)], text=f"Found {d.fact.key}.")
    theirs = FinalAnswer(claims=[Claim(d.fact.key, d.other_value, True)],
                         text=f"Found {d.fact.key}.")  # fmt: skip
    turns: list[Turn] = [
        TaskTurn(d.prompt, [_need(d, given=True)]),
        _upstream(own, sender=me),
        *(_upstream(theirs, sender=p) for p in peers),
    ]
    stance = Stance(deliberate=True, own_evidence={d.fact.key: d.value})
    request = _writer(turns, agent=me, stance=stance)
    return Probe("disagreeing_peer", index, request, d, key=d.fact.key, wants_final=True)


BUILDERS = {
    "first_call": first_call,
    "transient": transient,
    "wrong_arg_with_options": wrong_arg_with_options,
    "wrong_arg_without_options": wrong_arg_without_options,
    "missing_arg": missing_arg,
    "empty_result": empty_result,
    "empty_upstream": empty_upstream,
    "missing_upstream": missing_upstream,
    "failed_upstream": failed_upstream,
    "disagreeing_peer": disagreeing_peer,
}


def plan(seed: int, probes: int, families: list[str] | None = None) -> list[Probe]:
    """`probes` probes of every family (or of `families`), each seeded by (seed, family,
    index): the same seed gives the same conversations."""
    chosen = families or list(FAMILIES)
    out: list[Probe] = []
    for family in chosen:
        for i in range(probes):
            rng = stream(seed, "calibrate", family, i)
            out.append(BUILDERS[family](i, draw(rng), rng))
    return out
