"""What an agent does: the four behaviours, and the three roles that are presets of them.

A role is a name the user chooses ("triage", "planner"); its behaviour says what the
agent does with a trial:
- gather: fetch the needs its tools serve, pass on what it found and what it received;
- synthesise: turn what it received (and what its own tools fetch) into a report;
- check: verify the claims it receives against its tools, send back what is wrong;
- route: pass the task and what it received on, calling no tool.
"""

from __future__ import annotations

from typing import Literal

Behaviour = Literal["gather", "synthesise", "check", "route"]

ROLE_PRESETS: dict[str, Behaviour] = {
    "researcher": "gather",
    "writer": "synthesise",
    "reviewer": "check",
}
#: Behaviours that fetch needs with their tools (a need must have such a holder).
GATHERS: frozenset[str] = frozenset({"gather", "synthesise"})
#: Behaviours that call tools at all.
CALLS_TOOLS: frozenset[str] = frozenset({"gather", "synthesise", "check"})

#: The system prompt of each behaviour (a real model's instructions when the agent
#: declares none).
DEFAULT_INSTRUCTIONS: dict[Behaviour, str] = {
    "gather": "You are a researcher. Use the tools to find each fact the task needs, "
    "then submit what you found. Never state a fact you did not get from a tool.",
    "synthesise": "You are a writer. Turn the findings you receive into a report. If an "
    "upstream agent reports errors, partial_failure or low confidence, do not write around "
    "the gap: flag it or abstain.",
    "check": "You are a reviewer. Check the report you receive against its sources; flag "
    "or withhold claims that are not supported.",
    "route": "You are a coordinator. Pass the task on to the agents that can answer it; "
    "do not answer it yourself.",
}

#: The system prompt of an inspector on an agent's inputs (errorflow.scenario.spec.defence_model).
INSPECTOR_INSTRUCTIONS = (
    "You are an inspector on a message between agents. Verify its claims with the tools; "
    "correct a claim the tools contradict (or withhold it), and pass the message on."
)
