"""How a scenario is identified and shown outside the process that runs it.

`public` is the scenario as it may be stored and published (every string redacted, as
data: redacting JSON text could break its escapes); `sha` identifies the exact scenario
(seed, trials and propagation included), so a resumed run or a joining agent can prove
it is the same experiment without the secrets ever leaving the process.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path

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


def agent_view(
    data: Mapping[str, JsonValue], code: Mapping[str, str] | None = None
) -> dict[str, JsonValue]:
    """The part of a (public) scenario an agent's behaviour depends on; with the
    digests of the code its python agents and tools run (`code_of`), when it has any."""
    view: dict[str, JsonValue] = {k: v for k, v in data.items() if k not in RUNNER_ONLY}
    if code:
        view[CODE] = dict(code)
    return view


#: Where `agent_view` puts the code's digests (no scenario field has this name).
CODE = "(code)"


def code_of(scenario: Scenario) -> dict[str, str]:
    """A digest of the file each python agent's and tool's `function` is in, by its
    place (`agents.clerk`): the public scenario shows no path, so a process joining a
    run proves it runs the same code this way, as it proves the same scenario."""
    refs = {f"agents.{n}": a.function for n, a in scenario.agents.items() if a.function}
    refs |= {f"tools.{n}": t.function for n, t in scenario.tools.items() if t.function}
    return {place: _file_digest(ref) for place, ref in sorted(refs.items())}


def _file_digest(ref: str) -> str:
    target = ref.rpartition(":")[0]
    try:
        if target.endswith(".py") or "/" in target or "\\" in target:
            origin: str | None = target
        else:
            spec = importlib.util.find_spec(target)
            origin = spec.origin if spec is not None else None
        if origin is None or not origin.endswith(".py"):
            return "not a file"
        return hashlib.sha256(Path(origin).read_bytes()).hexdigest()[:16]
    except (ImportError, OSError, ValueError):
        return "not found"


def sha(scenario: Scenario) -> str:
    return hashlib.sha256(scenario.model_dump_json().encode()).hexdigest()
