"""errorflow: multi-agent LLM simulation over MQTT with error propagation.

The public surface: load a scenario, run it, read the outcome. Names are re-exported
lazily (PEP 562), so `import errorflow.policies.retry` loads no broker, database or UI
library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "ErrorflowError": "errorflow.core.errors",
    "Envelope": "errorflow.protocol.envelope",
    "Kind": "errorflow.protocol.envelope",
    "Status": "errorflow.protocol.envelope",
    "WireError": "errorflow.protocol.envelope",
    "RunOptions": "errorflow.runtime.run_options",
    "RunResult": "errorflow.runtime.run_result",
    "run_scenario": "errorflow.runtime.runner",
    "Scenario": "errorflow.scenario.spec.model",
    "load_scenario": "errorflow.scenario.loader",
    "ScenarioError": "errorflow.scenario.loader",
    "Label": "errorflow.scoring.score",
    "ToolContext": "errorflow.core.tool_context",
    "Outcome": "errorflow.scoring.score",
    "AgentContext": "errorflow.agents.own.context",
    "AgentReply": "errorflow.agents.own.context",
    "ToolResult": "errorflow.agents.own.context",
    "run_pydantic_ai": "errorflow.agents.own.pydantic_ai_adapter",
}

__all__ = [
    "AgentContext",
    "AgentReply",
    "Envelope",
    "ErrorflowError",
    "Kind",
    "Label",
    "Outcome",
    "RunOptions",
    "RunResult",
    "Scenario",
    "ScenarioError",
    "Status",
    "ToolContext",
    "ToolResult",
    "WireError",
    "__version__",
    "load_scenario",
    "run_pydantic_ai",
    "run_scenario",
]

if TYPE_CHECKING:
    from errorflow.agents.own.context import AgentContext, AgentReply, ToolResult
    from errorflow.agents.own.pydantic_ai_adapter import run_pydantic_ai
    from errorflow.core.errors import ErrorflowError
    from errorflow.core.tool_context import ToolContext
    from errorflow.protocol.envelope import (
        Envelope,
        Kind,
        Status,
        WireError,
    )
    from errorflow.runtime.run_options import RunOptions
    from errorflow.runtime.run_result import RunResult
    from errorflow.runtime.runner import run_scenario
    from errorflow.scenario.loader import ScenarioError, load_scenario
    from errorflow.scenario.spec.model import Scenario
    from errorflow.scoring.score import Label, Outcome


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'errorflow' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # resolved once
    return value
