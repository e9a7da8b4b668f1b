"""An agent's policy as the scenario declares it: a preset and its overrides, built once
when the scenario was validated (errorflow.scenario.spec.agent_policy)."""

from __future__ import annotations

from errorflow.policies.config import PolicyConfig
from errorflow.scenario.spec.model import Scenario


def policy_for(scenario: Scenario, agent: str) -> PolicyConfig:
    return scenario.agents[agent].policy.config
