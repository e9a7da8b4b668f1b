"""An agent's policy as the scenario declares it: a preset and its overrides, built once."""

from __future__ import annotations

from errorflow.policies.config import PolicyConfig
from errorflow.policies.strategies import build_policy
from errorflow.scenario.model import Scenario


def policy_for(scenario: Scenario, agent: str) -> PolicyConfig:
    spec = dict(scenario.agents[agent].policy)
    strategy = str(spec.pop("strategy", "resilient"))
    return build_policy(strategy, spec)
