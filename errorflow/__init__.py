"""errorflow: multi-agent LLM simulation over MQTT with error propagation.

The public surface: load a scenario, run it, read the outcome.
"""

__version__ = "0.1.0"

from errorflow.bus.envelope import Envelope, Kind, Status, WireError  # noqa: E402
from errorflow.runner import RunOptions, RunResult, run_scenario  # noqa: E402
from errorflow.scenario import Scenario, load_scenario  # noqa: E402
from errorflow.scenario_loader import ScenarioError  # noqa: E402
from errorflow.scoring import Label, Outcome  # noqa: E402

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
