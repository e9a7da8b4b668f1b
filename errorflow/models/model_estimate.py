"""What a run would send a real model, before it sends anything (`--dry-run`).

Expected: the run is run in-process with the simulated model answering in place of
every real one (its `profile`, small-local by default), and every request it is asked
is rendered exactly as the agent's backend (its `Wire`) would send it; its calls and the
tokens of those requests and of the replies (the simulated answer as Messages API
content blocks, for every API) are counted by the rule of errorflow/models/token_estimate.py.

At most: what the policy lets any model do, whatever it answers. Per agent, trial and
revision round, at most `guards.max_steps` steps (fewer when `budget.max_model_calls_
per_task` is set) of `model_retry.max_attempts` calls;
each reply at most `max_tokens`; each request at most the largest first request the
simulated path saw for that agent (system, tools, task, upstream results), plus every
upstream agent's `max_tokens` (a real upstream may answer longer), plus, for each
later step, one reply (`max_tokens`) and one tool observation (at most the scenario's
whole world, or the largest findings a task may fetch when the agent has Python tools).
Not counted: requests re-sent after a server's 429 (paced, not model calls), and a
server's own tokenizer, which may count differently.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import JsonValue

from errorflow.models.backend import (
    AssistantTurn,
    ModelBackend,
    ModelRequest,
    ModelResponse,
)
from errorflow.models.serving import Tally, model_label
from errorflow.models.token_estimate import input_tokens, output_tokens, tokens_of
from errorflow.models.wire import Wire
from errorflow.protocol.claims import claim_to_wire
from errorflow.scenario.spec.model import MAX_FINDINGS_BYTES, Scenario

#: What an observation adds around its data (ok flag, error class and message).
OBSERVATION_OVERHEAD_TOKENS = 500


def reply_blocks(response: ModelResponse) -> list[JsonValue]:
    """A simulated reply as the content blocks a real one would carry."""
    from errorflow.models.anthropic.request import SUBMIT_TOOL

    blocks: list[JsonValue] = []
    for call in response.calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name,
                       "input": call.arguments})  # fmt: skip
    if response.final is not None:
        answer = response.final
        submitted: dict[str, JsonValue] = {
            "claims": [claim_to_wire(c) for c in answer.claims],
            "abstained": answer.abstained,
            "flags": list(answer.flags),
            "unresolved": list(answer.unresolved),
            "text": answer.text,
        }
        blocks.append({"type": "tool_use", "id": "final", "name": SUBMIT_TOOL,
                       "input": submitted})  # fmt: skip
    return blocks


class EstimatingBackend:
    """The simulated model answering for a real one, counting what would be sent."""

    def __init__(self, inner: ModelBackend, wire: Wire, tally: Tally, label: str) -> None:
        self.inner, self.wire, self.tally, self.label = inner, wire, tally, label

    async def complete(self, request: ModelRequest) -> ModelResponse:
        body, _ = self.wire.render(request)
        sent = input_tokens(body)
        if not any(isinstance(t, AssistantTurn) for t in request.turns):
            first = self.tally.first_input
            first[request.agent] = max(first.get(request.agent, 0), sent)
        response = await self.inner.complete(request)
        self.tally.add(self.label, sent, output_tokens(reply_blocks(response)))
        return response


@dataclass(frozen=True)
class Bound:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Bound) -> Bound:
        return Bound(
            self.calls + other.calls,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
        )


def _rounds(scenario: Scenario) -> int:
    """Rounds any agent may run a trial: 1, plus the most send-backs a reviewer allows
    (a manager runs 2: its dispatch and its work on its delegates' results)."""
    send_backs = [a.max_revisions for a in scenario.agents.values() if a.returns_to]
    managers = any(a.delegates for a in scenario.agents.values())
    return max(1 + max(send_backs, default=0), 2 if managers else 1)


def _observation_cap(scenario: Scenario, agent: str) -> int:
    spec = scenario.agents[agent]
    if not spec.does.calls_tools or not spec.tools:
        return 0
    if any(scenario.tools[t].kind in ("python", "mcp") for t in spec.tools):
        return tokens_of("x" * MAX_FINDINGS_BYTES)
    return tokens_of(scenario.world.model_dump(mode="json")) + OBSERVATION_OVERHEAD_TOKENS


def agent_bound(scenario: Scenario, agent: str, first_input: int) -> Bound:
    """At most what one agent's real model may be sent in one run of `scenario`."""
    spec = scenario.agents[agent]
    policy = spec.policy.config
    steps = policy.guards.max_steps
    if policy.budget.max_model_calls_per_task > 0:  # checked before every step
        steps = min(steps, policy.budget.max_model_calls_per_task)
    calls_per_round = steps * policy.model_retry.max_attempts
    calls = scenario.trials * _rounds(scenario) * calls_per_round
    senders = [*scenario.upstream_of(agent), *spec.delegates]
    upstream = sum(scenario.agents[u].model.max_tokens for u in senders)
    growth = spec.model.max_tokens + _observation_cap(scenario, agent)
    per_call = first_input + upstream + (steps - 1) * growth
    return Bound(calls, calls * per_call, calls * spec.model.max_tokens)


def run_bounds(scenario: Scenario, tally: Tally) -> dict[str, Bound]:
    """At most what each real model (by label) may be sent in one run of `scenario`."""
    out: dict[str, Bound] = {}
    for name, agent in scenario.agents.items():
        if agent.model.backend == "simulated":
            continue
        label = model_label(agent.model)
        bound = agent_bound(scenario, name, tally.first_input.get(name, 0))
        out[label] = out.get(label, Bound()) + bound
    return out
