"""What an agent does: the five behaviours, each with the traits that follow from it, and
the three roles that are presets of them.

A role is a name the user chooses ("triage", "planner"); its behaviour says what the
agent does with a trial:
- gather: fetch the needs its tools serve, pass on what it found and what it received;
- synthesise: turn what it received (and what its own tools fetch) into a report;
- check: verify the claims it receives against its tools, send back what is wrong;
- route: pass the task and what it received on, calling no tool;
- python: the user's own async callable does the work (`function:`), through the same
  gates (errorflow.agents.own); its model, when it asks one, acts as a gatherer.

Everything that depends on the behaviour (its prompt, whether it calls tools, which
needs it answers for, whether its result carries its inputs' findings on) is a field
of its `Behaviour` here, so a new behaviour is one entry in `BEHAVIOURS`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

BehaviourName = Literal["gather", "synthesise", "check", "route", "python"]
#: The needs an agent answers for: none, those its own tools serve, or all of them.
Answers = Literal["none", "served", "all"]
#: How the simulated model acts a behaviour out (errorflow.models.simulated): fetch the
#: needs, write the report, check the claims received, or pass the task on.
Acting = Literal["research", "write", "review", "pass"]


class ServedNeed(Protocol):
    """A need as far as who answers for it goes (a `NeedView` is one)."""

    @property
    def tool(self) -> str: ...


_Need = TypeVar("_Need", bound=ServedNeed)


@dataclass(frozen=True)
class Behaviour:
    name: BehaviourName
    #: The system prompt a real model gets when the agent declares no instructions.
    instructions: str
    #: It is offered its tools (a routing agent calls none).
    calls_tools: bool
    #: It fetches the needs its tools serve (a need must have such a holder).
    gathers: bool
    #: Its result carries its inputs' findings on (errorflow.agents.carry).
    carries: bool
    #: The needs its answer is accountable for (see `own_needs`).
    answers_for: Answers
    #: It verifies the claims it receives with its tools (a second source is called).
    verifies: bool
    #: It writes the report, so it is the one that delivers it (a `report_sink` tool).
    delivers: bool
    #: It checks a report and sends back what is wrong (a reviewer).
    reviews: bool
    #: What the simulated model does in its place.
    simulated_as: Acting

    def own_needs(self, tools: Collection[str], needs: Sequence[_Need]) -> list[_Need]:
        """The needs this agent answers for, among `needs`, holding `tools`."""
        if self.answers_for == "none":
            return []
        if self.answers_for == "all":
            return list(needs)
        return [n for n in needs if n.tool in tools]


BEHAVIOURS: dict[str, Behaviour] = {
    "gather": Behaviour(
        "gather",
        "You are a researcher. Use the tools to find each fact the task needs, "
        "then submit what you found. Never state a fact you did not get from a tool.",
        calls_tools=True,
        gathers=True,
        carries=True,
        answers_for="served",
        verifies=False,
        delivers=False,
        reviews=False,
        simulated_as="research",
    ),
    "synthesise": Behaviour(
        "synthesise",
        "You are a writer. Turn the findings you receive into a report. If an "
        "upstream agent reports errors, partial_failure or low confidence, do not write around "
        "the gap: flag it or abstain.",
        calls_tools=True,
        gathers=True,
        carries=False,
        answers_for="all",
        verifies=True,
        delivers=True,
        reviews=False,
        simulated_as="write",
    ),
    "check": Behaviour(
        "check",
        "You are a reviewer. Check the report you receive against its sources; flag "
        "or withhold claims that are not supported.",
        calls_tools=True,
        gathers=False,
        carries=False,
        answers_for="all",
        verifies=True,
        delivers=False,
        reviews=True,
        simulated_as="review",
    ),
    "route": Behaviour(
        "route",
        "You are a coordinator. Pass the task on to the agents that can answer it; "
        "do not answer it yourself.",
        calls_tools=False,
        gathers=False,
        carries=True,
        answers_for="none",
        verifies=False,
        delivers=False,
        reviews=False,
        simulated_as="pass",
    ),
    # The user's code decides what it calls and claims; errorflow accounts for the
    # needs its tools serve, as for a gatherer, and carries nothing on by itself.
    "python": Behaviour(
        "python",
        "You help an agent written in Python. Use the tools to find each fact the task "
        "needs, then submit what you found. Never state a fact you did not get from a tool.",
        calls_tools=True,
        gathers=True,
        carries=False,
        answers_for="served",
        verifies=False,
        delivers=False,
        reviews=False,
        simulated_as="research",
    ),
}

#: The roles that name a behaviour by themselves (any other role declares `behaviour`).
ROLE_PRESETS: dict[str, BehaviourName] = {
    "researcher": "gather",
    "writer": "synthesise",
    "reviewer": "check",
}
#: A role that is no preset, without a declared behaviour (only a model request built by
#: hand can be one: a scenario's agent must declare a behaviour for such a role).
FALLBACK: BehaviourName = "synthesise"


def behaviour_of(role: str, declared: str | None = None) -> Behaviour:
    """The behaviour an agent (or a model request) has: the declared one, else the
    role's preset, else the fallback."""
    if declared:
        return BEHAVIOURS[declared]
    return BEHAVIOURS[ROLE_PRESETS.get(role, FALLBACK)]


#: The system prompt of an inspector on an agent's inputs (errorflow.scenario.spec.defence_model).
INSPECTOR_INSTRUCTIONS = (
    "You are an inspector on a message between agents. Verify its claims with the tools; "
    "correct a claim the tools contradict (or withhold it), and pass the message on."
)
