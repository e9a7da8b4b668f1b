"""errorflow: multi-agent LLM simulation over MQTT with error propagation.

The public surface: load a scenario, run it, read the outcome.
"""

__version__ = "0.1.0"

from errorflow.bus.envelope import Envelope, Kind, Status, WireError
from errorflow.runner import RunOptions, RunResult, run_scenario
from errorflow.scenario import Scenario, load_scenario
from errorflow.scenario_loader import ScenarioError
from errorflow.scoring import Label, Outcome

__all__ = [
    "Envelope",
    "Kind",
    "Label",
    "Outcome",
    "RunOptions",
    "RunResult",
    "Scenario",
    "ScenarioError",
    "Status",
    "WireError",
    "__version__",
    "load_scenario",
    "run_scenario",
]
