"""`errorflow agent`: one agent of a scenario as its own process, joining a run."""

from __future__ import annotations

from errorflow.agents.agent import Agent
from errorflow.agents.backends import ConfigurationError, check_backends, check_servers
from errorflow.bus.mqtt import MqttBus
from errorflow.bus.url import BrokerURL
from errorflow.scenario.model import Scenario
from errorflow.scenario.overrides import with_settings


async def run_agent_process(
    scenario: Scenario,
    name: str,
    run_id: str,
    url: BrokerURL,
    *,
    run_key: bytes,
    propagation: str | None = None,
    seed: int | None = None,
) -> None:
    scenario = with_settings(scenario, seed=seed, propagation=propagation or None)
    api_key = check_backends(scenario)
    await check_servers(scenario, api_key, only=[name])  # before joining: nothing measured
    bus = MqttBus(url)
    try:
        conn = await bus.connect(f"{run_id}-{name}")
        agent = Agent(name, scenario, run_id, conn, run_key=run_key, api_key=api_key)
        await agent.run()
        if agent.mismatch:
            raise ConfigurationError(agent.mismatch)
    finally:
        await bus.close()
