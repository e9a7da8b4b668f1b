"""The simulated model: a seeded stand-in for an LLM, driven by a behaviour profile.

It reads the same turns a real model would and answers with tool calls or a final
answer. What it does at each decision point is one draw against a named tendency
(`errorflow.scenario.spec.profiles`). It reads error observations the way a model does: the
structured fields when they are there (`code`, `options`, `field`), otherwise the
words of the raw message. It is one instance per (trial, agent), so its memory of
what it gave up on lives exactly as long as a conversation.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import replace

from pydantic import JsonValue

from errorflow.core.draws import Draws
from errorflow.models.backend import (
    Inspection,
    ModelRequest,
    ModelResponse,
    NeedView,
    ObservationTurn,
    TaskTurn,
    ToolCall,
    UpstreamTurn,
    Usage,
)
from errorflow.models.deliberation import deliberate
from errorflow.models.simulated_reading import (
    NeedState,
    Obs,
    TurnLengths,
    agrees,
    best_option,
    check_claim,
    claim_items,
    expected_keys,
    hidden_identifier,
    inspected,
    invent,
    is_batch,
    json_arg,
    key_of,
    lineage,
    need_states,
    perceive,
    resolved,
    served_by,
    source_value,
    strings,
    substantial,
    task_turn,
    troubled,
    upstream_turns,
)
from errorflow.protocol.claims import Claim, FinalAnswer
from errorflow.protocol.envelope import JsonObject
from errorflow.scenario.spec.behaviour import behaviour_of
from errorflow.scenario.spec.profiles import Tendencies


class SimulatedModel:
    def __init__(
        self, tendencies: Tendencies, rng: random.Random, draws: Draws | None = None
    ) -> None:
        """`rng`: the conversation's stream; `draws` (paired draws) replaces it."""
        self.b = tendencies
        self.draws = draws if draws is not None else Draws(rng)
        self._given_up: set[str] = set()
        self._decided: set[str] = set()  # observation ids already reacted to
        self._draft: FinalAnswer | None = None  # a writer's report, once composed
        self._known: dict[str, JsonValue] = {}  # need values this conversation has seen
        self._troubled = False  # whether an upstream message showed a failure
        self._gaps: set[str] = set()  # needs (and batch items) upstream left unresolved
        self._sampled: set[str] | None = None  # an inspector's claims to check, drawn once
        self._challenged: set[str] | None = None  # a challenger's claims to re-check
        self._turn_chars = TurnLengths()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        acts = behaviour_of(request.role, request.behaviour).simulated_as
        if request.stance.deliberate:
            response = self._deliberate(request)
        elif request.stance.inspect is not None:
            response = self._inspect(request, request.stance.inspect)
        elif acts == "research":
            response = self._research(request)
        elif acts == "review":
            response = self._review(request)
        elif acts == "pass":
            response = ModelResponse(final=FinalAnswer(text="Passed the task on."))
        else:
            response = self._write(request)
        response.usage = self._usage(request, response)
        return response

    # -- researcher -----------------------------------------------------------
    def _research(self, request: ModelRequest) -> ModelResponse:
        task = task_turn(request.turns)
        if task is None:
            return ModelResponse(final=FinalAnswer(abstained=True, text="no task"))
        tools = {t.name for t in request.tools}
        # A researcher answers for the needs its tools serve (fan-in: each its own).
        mine = TaskTurn(task.prompt, [n for n in task.needs if n.tool in tools])
        states = need_states(mine, request.turns)
        self._learn(upstream_turns(request.turns), states)
        calls = self._calls(states)
        if calls:
            return ModelResponse(calls=calls, stop_reason="tool_use")
        return ModelResponse(final=self._research_answer(states), stop_reason="end_turn")

    def _learn(self, upstream: list[UpstreamTurn], states: list[NeedState]) -> None:
        """What the conversation knows so far: certain upstream claims and own results
        (the values dependent needs take their arguments from)."""
        self._troubled = troubled(upstream)
        self._gaps = {k for turn in upstream for k in turn.answer.unresolved}
        for turn in upstream:
            for claim in turn.answer.claims:
                if claim.certain and substantial(claim):
                    self._known.setdefault(claim.key, claim.value)
        for st in states:
            obs = resolved(st)
            if obs is not None and obs.get("result") not in (None, [], {}):
                self._known[st.need.id] = obs.get("result")

    def _calls(self, states: list[NeedState]) -> list[ToolCall]:
        calls: list[ToolCall] = []
        pending = {st.need.id for st in states if st.need.id not in self._given_up}
        pending -= {st.need.id for st in states if resolved(st) is not None}
        for st in states:
            if st.need.id in self._given_up or resolved(st) is not None:
                continue
            if any(dep in pending for dep, _ in st.need.depends.values()):
                continue  # its argument comes from a need still being fetched
            call = self._next_call(st)
            if call is None:
                self._given_up.add(st.need.id)
            else:
                calls.append(call)
        return calls

    def _next_call(self, st: NeedState) -> ToolCall | None:
        need = st.need
        n = len(st.calls)
        if n == 0:
            first = self._first_argument(need)
            if first is None and need.depends:
                return None  # heeded the upstream failure: the need is given up
            call = self._call(need, first, n)
            # Drawn only when the profile gives it a chance: older scenarios keep their draws.
            p_unknown = self.b.p_call_unknown_tool
            if p_unknown and self.draws.chance("unknown_tool", need.id, p_unknown):
                call = ToolCall(call.id, f"{need.tool}_v2", call.arguments)
            return call
        last_call, last_obs = st.calls[-1]
        if last_obs is None:
            return None
        obs = last_obs.content
        if obs.get("ok"):
            return None
        kind = perceive(obs)
        if kind == "transient":
            if self.draws.chance("self_retry", need.id, self.b.p_self_retry_transient):
                args = last_call.arguments if isinstance(last_call.arguments, dict) else {}
                return self._call(need, args.get(need.arg), n, previous=args)
            return None
        if kind == "missing":
            if self.draws.chance("repair_missing", need.id, self.b.p_repair_missing_arg):
                previous = last_call.arguments if isinstance(last_call.arguments, dict) else {}
                value = previous.get(need.arg, self._first_argument(need))
                return self._call(need, value, n, previous)
            return None
        if kind == "wrong_tool":
            if need.tool in strings(obs.get("options")) and (
                self.draws.chance("repair_tool", need.id, self.b.p_repair_with_options)
            ):
                return ToolCall(f"{need.id}#{n}", need.tool, last_call.arguments)
            return None
        if kind == "wrong_arg":
            options = strings(obs.get("options"))
            p = self.b.p_repair_with_options if options else self.b.p_repair_without_options
            if self.draws.chance("repair_arg", need.id, p):
                return self._repair(need, last_call, obs, options, n)
            return None
        return None  # permission, not found, circuit open, blocked...: give up

    def _repair(
        self, need: NeedView, last: ToolCall, obs: Obs, options: list[str], n: int
    ) -> ToolCall | None:
        """A new call with the wrong argument replaced: by the identifier when the task
        gives it, else by the listed option the wording points at, else (an argument
        that came from upstream, which the model cannot check) by a guess among them."""
        previous = last.arguments if isinstance(last.arguments, dict) else {}
        wrong = obs.get("field")
        if isinstance(wrong, str) and wrong in need.depends and wrong != need.arg:
            if not options:
                return None
            guess = options[self.draws.of("guess_option", need.id).randrange(len(options))]
            return self._call(need, previous.get(need.arg), n, previous={**previous, wrong: guess})
        if need.arg in need.depends and need.identifier is None:
            if not options:
                return None
            pick = self.draws.of("guess_option", need.id).randrange(len(options))
            return self._call(need, options[pick], n, previous)
        target = need.identifier if need.identifier else best_option(need, options)
        if target is None:
            return None
        return self._call(need, json_arg(target), n, previous)

    def _first_argument(self, need: NeedView) -> JsonValue:
        if need.arg in need.depends:
            return self._dependency(need, need.arg)
        if need.identifier is not None:
            return json_arg(need.identifier)
        if self.draws.chance("use_wording", need.id, self.b.p_use_task_wording):
            return need.wording
        if self.draws.chance("guess_identifier", need.id, self.b.p_guess_identifier):
            # A lucky guess: the model happens to produce the real identifier. The
            # simulator knows it through the need's tool domain, the model does not.
            return json_arg(hidden_identifier(need))
        return need.wording

    def _dependency(self, need: NeedView, arg: str) -> JsonValue:
        """An argument that comes from another need: the value the conversation has for
        it; without one, the task's wording (a model must write something), unless the
        model heeds an upstream failure and gives the need up (None)."""
        source, field = need.depends[arg]
        value = self._known.get(source)
        if value is None:
            value = self._batch(source)
            if value is not None and self._heeds_gaps_in(source):
                return None  # part of the batch is missing: the need stays open
        if field is not None:
            value = value.get(field) if isinstance(value, dict) else None
        if value is not None:
            return value
        if self._troubled and self.draws.chance("heed", need.id, self.b.p_heed_upstream):
            return None
        return need.wording

    def _batch(self, source: str) -> JsonValue:
        """A batch need's whole answer: its items, as they were claimed (None: none)."""
        prefix = f"{source}."
        items = {k[len(prefix) :]: v for k, v in self._known.items() if k.startswith(prefix)}
        return dict(sorted(items.items())) or None

    def _heeds_gaps_in(self, source: str) -> bool:
        """Upstream said items of the batch are missing; the model heeds that (one draw,
        only when there is such a gap)."""
        prefix = f"{source}."
        gap = any(k == source or k.startswith(prefix) for k in self._gaps)
        return gap and self.draws.chance("heed_gaps", source, self.b.p_heed_upstream)

    def _call(
        self,
        need: NeedView,
        value: JsonValue,
        n: int,
        previous: Mapping[str, JsonValue] | None = None,
    ) -> ToolCall:
        args: JsonObject = {}
        if need.fixed or need.depends:
            args.update(need.fixed)
            for arg in need.depends:
                if arg != need.arg:
                    known = (previous or {}).get(arg)
                    args[arg] = known if known is not None else self._dependency(need, arg)
        args[need.arg] = value
        if self.draws.chance("drop_arg", need.id, self.b.p_drop_required_arg):
            args = {}
        return ToolCall(id=f"{need.id}#{n}", name=need.tool, arguments=args)

    def _research_answer(self, states: list[NeedState]) -> FinalAnswer:
        answer = FinalAnswer()
        for st in states:
            obs = resolved(st)
            if obs is None:
                answer.unresolved.append(st.need.id)
                continue
            value = obs.get("result")
            if is_batch(st.need) and isinstance(value, dict) and value:
                claim_items(answer, st.need, value, obs)
            else:
                self._claim_value(answer, st.need, value)
            if obs.get("failed_items"):
                answer.flags.append(f"{st.need.id}: items failed: {obs['failed_items']}")
        found = ", ".join(c.key for c in answer.claims) or "nothing"
        answer.text = f"Found {found}." + (
            f" Could not get {', '.join(answer.unresolved)}." if answer.unresolved else ""
        )
        return answer

    def _claim_value(self, answer: FinalAnswer, need: NeedView, value: JsonValue) -> None:
        """One claim for the need; an empty result may be stated or flagged as doubtful."""
        if value in (None, [], {}):
            certain = not self.draws.chance("flag_empty", need.id, self.b.p_flag_empty)
            if not certain:
                answer.flags.append(f"{need.id}: empty result, may be incomplete")
            answer.claims.append(Claim(need.id, value, certain))
        else:
            answer.claims.append(Claim(need.id, value, True))

    # -- writer -----------------------------------------------------------------
    def _write(self, request: ModelRequest) -> ModelResponse:
        task = task_turn(request.turns)
        upstream = upstream_turns(request.turns)
        needs = task.needs if task else []
        sink = next((t for t in request.tools if t.delivers), None)
        sent = [
            t
            for t in request.turns
            if isinstance(t, ObservationTurn) and sink and t.tool == sink.name
        ]
        if self._draft is not None and sent:  # the report went out (or failed to)
            if sent[-1].is_error:
                self._draft.flags.append(f"delivery: {sent[-1].tool} failed; report not sent")
            return ModelResponse(final=self._draft, stop_reason="end_turn")
        gathered = self._gather_gaps(request, needs, upstream)
        if isinstance(gathered, ModelResponse):
            return gathered  # fetching what no upstream agent found
        # A challenger trusts what its own tools said over what it was told.
        sources = [*gathered, *upstream] if self._challenged else [*upstream, *gathered]
        draft = self._compose(needs, sources)
        if sink is not None and not draft.abstained:
            self._draft = draft
            body: JsonObject = {
                "title": f"{request.agent} report"[:300],
                "body": draft.text[:50_000],
            }
            call = ToolCall(id=f"deliver#{sink.name}", name=sink.name, arguments=body)
            return ModelResponse(calls=[call], stop_reason="tool_use")
        return ModelResponse(final=draft, stop_reason="end_turn")

    def _compose(self, needs: list[NeedView], upstream: list[UpstreamTurn]) -> FinalAnswer:
        heed = troubled(upstream) and self.draws.chance("heed", "", self.b.p_heed_upstream)
        rejected = {k for u in upstream for k in u.answer.revise}
        answer = FinalAnswer()
        for key, need in expected_keys(needs):
            said = [c for u in upstream for c in u.answer.claims if c.key == key]
            # The first source that states it with substance, else the first that says it.
            claim = next((c for c in said if c.certain and substantial(c)), None) or next(
                iter(said), None
            )
            self._report(answer, key, need, claim, rejected=key in rejected, heed=heed)
        answer.abstained = bool(needs) and not answer.claims
        answer.text = (
            "Report withheld: upstream failures."
            if answer.abstained
            else f"Report on {', '.join(c.key for c in answer.claims)}."
        )
        return answer

    def _gather_gaps(
        self, request: ModelRequest, needs: list[NeedView], upstream: list[UpstreamTurn]
    ) -> ModelResponse | list[UpstreamTurn]:
        """A writer holding fetch tools first fetches the needs they serve that no
        upstream agent answered; what it finds joins its inputs."""
        fetch = {t.name for t in request.tools if not t.delivers}
        answered = {
            c.key for u in upstream for c in u.answer.claims if c.certain and substantial(c)
        }
        gaps = [
            view
            for n in needs
            if (view := served_by(n, fetch)) is not None and not any(key_of(k, n) for k in answered)
        ]
        gaps += self._challenges(request, needs, fetch, gaps, answered)
        if not gaps:
            return []
        task = task_turn(request.turns)
        assert task is not None
        states = need_states(TaskTurn(task.prompt, gaps), request.turns)
        self._learn(upstream, states)
        calls = self._calls(states)
        if calls:
            return ModelResponse(calls=calls, stop_reason="tool_use")
        own = self._research_answer(states)
        return [UpstreamTurn(request.agent, "ok", 1.0, [], own)]

    def _report(
        self,
        answer: FinalAnswer,
        key: str,
        need: NeedView,
        claim: Claim | None,
        *,
        rejected: bool,
        heed: bool,
    ) -> None:
        """What the report says for one key, given the upstream claim for it (if any)
        and whether the writer heeds the upstream trouble."""
        if rejected and heed:
            answer.flags.append(f"{key}: rejected by review; not reported as fact")
        elif claim is not None and substantial(claim) and claim.certain:
            answer.claims.append(claim)
        elif heed:
            answer.flags.append(f"{key}: upstream failure; not reported as fact")
        elif claim is None:
            if self.draws.chance("fabricate", key, self.b.p_fabricate_on_missing):
                answer.claims.append(Claim(key, invent(need, self.draws.of("invent", key)), True))
            else:
                answer.unresolved.append(key)
        elif not claim.certain:
            answer.claims.append(claim)  # passes the doubt on honestly
        elif self.draws.chance("fabricate", key, self.b.p_fabricate_on_empty):  # empty answer
            answer.claims.append(Claim(key, invent(need, self.draws.of("invent", key)), True))
        else:
            answer.claims.append(claim)

    def _challenges(
        self,
        request: ModelRequest,
        needs: list[NeedView],
        fetch: set[str],
        gaps: list[NeedView],
        answered: set[str],
    ) -> list[NeedView]:
        """Needs answered upstream that a challenger re-checks with its own tools (one
        draw per such need, the first time it looks)."""
        p = request.stance.challenge
        if p <= 0:
            return []
        if self._challenged is None:
            gap_ids = {g.id for g in gaps}
            self._challenged = {
                n.id
                for n in needs
                if served_by(n, fetch) is not None
                and n.id not in gap_ids
                and any(key_of(k, n) for k in answered)
                and self.draws.chance("challenge", n.id, p)
            }
        return [served_by(n, fetch) or n for n in needs if n.id in self._challenged]

    # -- discussion ---------------------------------------------------------------
    def _deliberate(self, request: ModelRequest) -> ModelResponse:
        """A discussion round: the member's previous answer (the upstream turn it sent
        itself) revised in the light of its peers' (errorflow.models.deliberation). A
        challenger first re-checks, with its own tools, each disputed claim it can
        check (one draw per such claim) and goes with what its tools say."""
        upstream = upstream_turns(request.turns)
        own = next((u for u in upstream if u.sender == request.agent), None)
        peers = [u for u in upstream if u.sender != request.agent]
        previous = own.answer if own is not None else FinalAnswer(abstained=True)
        task = task_turn(request.turns)
        checked: dict[str, JsonValue] = {}
        if task is not None and request.stance.challenge > 0 and request.tools:
            found = self._recheck(request, task, previous, peers)
            if isinstance(found, ModelResponse):
                return found
            checked = found
        final = deliberate(
            previous,
            request.stance.own_evidence,
            peers,
            self.draws.of("deliberate"),
            self.b.p_keep_own_evidence,
        )
        if checked:
            final = replace(
                final,
                claims=[
                    Claim(c.key, checked[c.key], True) if c.key in checked else c
                    for c in final.claims
                ],
            )
        return ModelResponse(final=final, stop_reason="end_turn")

    def _recheck(
        self,
        request: ModelRequest,
        task: TaskTurn,
        previous: FinalAnswer,
        peers: list[UpstreamTurn],
    ) -> dict[str, JsonValue] | ModelResponse:
        """The challenger's own tool values for the disputed claims it re-checks."""
        tools = {t.name for t in request.tools}
        values: dict[str, set[str]] = {}
        for answer in [previous, *(p.answer for p in peers)]:
            for c in answer.claims:
                if c.certain and substantial(c):
                    values.setdefault(c.key, set()).add(json.dumps(c.value, sort_keys=True))
        disputed = {k for k, v in values.items() if len(v) > 1}
        need_of = {k: n for k in disputed for n in task.needs if key_of(k, n)}
        if self._challenged is None:
            self._challenged = {
                k
                for k in sorted(disputed)
                if k in need_of
                and served_by(need_of[k], tools) is not None
                and self.draws.chance("challenge", k, request.stance.challenge)
            }
        observed = self._observed(request, task, {need_of[k].id for k in self._challenged})
        if isinstance(observed, ModelResponse):
            return observed
        out: dict[str, JsonValue] = {}
        for key in self._challenged:
            obs = observed.get(need_of[key].id)
            value = source_value(key, need_of[key], obs)
            if obs is not None and value not in (None, [], {}):
                out[key] = value
        return out

    # -- inspector --------------------------------------------------------------
    def _inspect(self, request: ModelRequest, brief: Inspection) -> ModelResponse:
        """Check a share of a message's claims against the tools; correct or block what
        is contradicted. With a genealogy guard, a contradiction quarantines every
        claim of the same lineage: each is re-derived with the tools too."""
        task = task_turn(request.turns)
        upstream = upstream_turns(request.turns)
        if task is None or not upstream:
            return ModelResponse(final=FinalAnswer(abstained=True, text="nothing to inspect"))
        message = upstream[-1]
        tools = {t.name for t in request.tools}
        need_of = {c.key: n for c in message.answer.claims for n in task.needs if key_of(c.key, n)}
        if self._sampled is None:
            self._sampled = {
                c.key
                for c in message.answer.claims
                if c.key in need_of
                and served_by(need_of[c.key], tools) is not None
                and self.draws.chance("inspect", c.key, brief.check)
            }
        observed = self._observed(request, task, {need_of[k].id for k in self._sampled})
        if isinstance(observed, ModelResponse):
            return observed
        wrong = {k for k in self._sampled if not agrees(k, need_of[k], message, observed)}
        quarantined: set[str] = set()
        if wrong and brief.genealogy:
            lineages = {lineage(message, k) for k in wrong}
            quarantined = {
                c.key
                for c in message.answer.claims
                if lineage(message, c.key) in lineages and c.key in need_of
            } - self._sampled
            more = self._observed(request, task, {need_of[k].id for k in quarantined})
            if isinstance(more, ModelResponse):
                return more
            observed.update(more)
        answer = inspected(message, need_of, observed, self._sampled | quarantined, brief)
        return ModelResponse(final=answer, stop_reason="end_turn")

    def _observed(
        self, request: ModelRequest, task: TaskTurn, needs: set[str]
    ) -> dict[str, Obs | None] | ModelResponse:
        """What the tools say for the needs `needs` names, or the calls still to make
        (each with the agent's tool for it: the need's own, or a second source)."""
        tools = {t.name for t in request.tools}
        chosen = [served_by(n, tools) or n for n in task.needs if n.id in needs]
        states = need_states(TaskTurn(task.prompt, chosen), request.turns)
        self._learn(upstream_turns(request.turns), states)  # dependent needs' arguments
        calls = self._calls(states)
        if calls:
            return ModelResponse(calls=calls, stop_reason="tool_use")
        return {st.need.id: resolved(st) for st in states}

    # -- reviewer ---------------------------------------------------------------
    def _review(self, request: ModelRequest) -> ModelResponse:
        """Check each claim of the report against the tools; keep what checks out,
        send back what is contradicted, mark as uncertain what could not be checked."""
        task = task_turn(request.turns)
        upstream = upstream_turns(request.turns)
        if task is None:
            return ModelResponse(final=FinalAnswer(abstained=True, text="no task"))
        report = [c for u in upstream for c in u.answer.claims]
        tools = {t.name for t in request.tools}
        checkable = [
            view
            for n in task.needs
            if (view := served_by(n, tools)) is not None and any(key_of(c.key, n) for c in report)
        ]
        states = need_states(TaskTurn(task.prompt, checkable), request.turns)
        self._learn(upstream, states)  # a dependent need's argument: what it was told or found
        calls = self._calls(states)
        if calls:
            return ModelResponse(calls=calls, stop_reason="tool_use")
        observed = {st.need.id: resolved(st) for st in states}
        answer = FinalAnswer(
            flags=[f for u in upstream for f in u.answer.flags],
            unresolved=[k for u in upstream for k in u.answer.unresolved],
        )
        for claim in report:
            check_claim(answer, claim, task.needs, observed)
        answer.abstained = not answer.claims
        answer.text = f"Reviewed {len(report)} claim(s); {len(answer.revise)} rejected."
        return ModelResponse(final=answer, stop_reason="end_turn")

    # -- usage ----------------------------------------------------------------
    def _usage(self, request: ModelRequest, response: ModelResponse) -> Usage:
        chars = len(request.system) + sum(map(self._turn_chars, request.turns))
        chars += sum(len(t.description) + t.schema_chars for t in request.tools)
        out = self.b.output_tokens_per_call * max(1, len(response.calls))
        if response.final is not None:
            out += 10 * len(response.final.claims)
        return Usage(self.b.base_prompt_tokens + int(chars * self.b.tokens_per_char), out)
