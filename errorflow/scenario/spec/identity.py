"""How a scenario is identified and shown outside the process that runs it.

`public` is the scenario as it may be stored and published (every string redacted, as
data: redacting JSON text could break its escapes); `sha` identifies the exact scenario
(seed, trials and propagation included), so a resumed run or a joining agent can prove
it is the same experiment without the secrets ever leaving the process.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from pydantic import JsonValue

from errorflow.core.redact import redact_obj
from errorflow.scenario.spec.model import Scenario


def public(scenario: Scenario) -> dict[str, JsonValue]:
    result: dict[str, JsonValue] = redact_obj(scenario.model_dump(mode="json"))
    return result


def public_json(scenario: Scenario) -> str:
    return json.dumps(public(scenario))


def is_exact(scenario: Scenario) -> bool:
    """Redaction changed nothing: the public form can be run as it is."""
    return public(scenario) == scenario.model_dump(mode="json")


#: What the runner alone decides; an agent may join whatever these are.
RUNNER_ONLY = frozenset({"trials", "max_in_flight", "sweep", "reference", "description"})


def agent_view(data: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """The part of a (public) scenario an agent's behaviour depends on."""
    return {k: v for k, v in data.items() if k not in RUNNER_ONLY}


def sha(scenario: Scenario) -> str:
    return hashlib.sha256(scenario.model_dump_json().encode()).hexdigest()
