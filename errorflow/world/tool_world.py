"""The tool world as one agent reaches it: a tool client per trial, what each tool is
(the catalog), the ground truth of the task's needs, and which identifiers a fault
withholds from the model.

The runtime makes one for each agent (errorflow.runtime.participants) and the agent
never holds the scenario: the world reads its tools, tables, services and seed here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from types import MappingProxyType

from pydantic import JsonValue

from errorflow.scenario.spec.model import NeedSpec, Scenario
from errorflow.world.ground_truth import need_truths
from errorflow.world.services import ServiceRegistry
from errorflow.world.tool_catalog import ToolCatalog
from errorflow.world.tool_client import ToolClient, hidden_identifier


class ToolWorld:
    def __init__(
        self,
        scenario: Scenario,
        services: ServiceRegistry | None = None,
        truths: Mapping[str, JsonValue] | None = None,
    ) -> None:
        """`services`: the run's, shared by the agents of this process (None: a registry
        of this world's own); `truths`: each need's true answer, when the run's process
        has worked it out already (None: worked out here when first asked)."""
        self._scenario = scenario
        self.services = services if services is not None else ServiceRegistry(scenario)
        #: What each tool is (its arguments, description and schema), made once: an MCP
        #: tool's is read from its server.
        self.catalog = ToolCatalog.of(scenario)
        self._truths: Mapping[str, JsonValue] | None = truths

    def client(self, trial: int, owner: str) -> ToolClient:
        """The tool calls of `owner` (an agent, or one of its rounds) in `trial`."""
        return ToolClient(self._scenario, trial, owner, self.catalog, self.services)

    def truths(self) -> Mapping[str, JsonValue]:
        """Each need's true answer, by need id: worked out once (it may call Python and
        MCP tools)."""
        if self._truths is None:
            self._truths = MappingProxyType(need_truths(self._scenario, self.catalog))
        return self._truths

    async def work_out_truths(self) -> None:
        """Work the truths out now, in a thread: they may call the user's tools, slow
        ones too, which on the event loop would hold up everything else on it (a
        heartbeat, other agents' trials) at the agent's first trial."""
        if self._truths is None:
            await asyncio.to_thread(self.truths)

    def hidden(self, trial: int, need: NeedSpec) -> bool:
        """Whether a fault withholds `need`'s real identifier from the model in `trial`."""
        return hidden_identifier(self._scenario, trial, need)
