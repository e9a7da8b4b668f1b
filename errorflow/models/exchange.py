"""One model exchange (a request and the reply it got) and the key it is found by.

The response cache, the traffic log and recorded sessions (cassettes) all store
exchanges under one key: a hash of the request exactly as it goes on the wire (model,
system, messages, tools, max_tokens, temperature: everything the server reads), of the
experiment it belongs to and of where in it the request was made:

- the experiment: a digest of the scenario as an agent sees it (everything but the
  runner's trials, max_in_flight, sweep, reference and description; seed and
  propagation included), in its redacted public form, so that someone replaying a
  cassette from the published scenario finds the same keys;
- the place: trial, the agent (and revision round) asking, and how many identical
  requests it made before in that trial.

So a reply is never served to a different model, prompt, parameter, experiment or
trial: two trials that happen to ask the same first question each keep the reply they
were given, as a real model's sampling gave them two. The key does not hold the API key
or anything the server does not read.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict

from pydantic import JsonValue

from errorflow.protocol.envelope import JsonObject
from errorflow.scenario.spec import identity
from errorflow.scenario.spec.model import Scenario

#: Bumped when what the key covers changes (old entries then simply miss).
KEY_VERSION = 1


def canonical(value: object) -> str:
    """The one JSON text of a value (sorted keys, no spaces): what gets hashed."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _sha(value: object) -> str:
    return hashlib.sha256(canonical(value).encode()).hexdigest()


@dataclass(frozen=True)
class Experiment:
    """Which experiment a backend serves: the digest the keys use, and the stored
    run's `scenario_sha` (which finds a run's exchanges in a traffic log)."""

    digest: str
    scenario_sha: str

    @classmethod
    def of(cls, scenario: Scenario) -> Experiment:
        view = identity.agent_view(identity.public(scenario))
        return cls(digest=_sha(view)[:32], scenario_sha=identity.sha(scenario))


@dataclass(frozen=True)
class Place:
    """Where in the experiment a request is made."""

    trial: int
    owner: str  # the agent, `name@rN` in revision round N


def exchange_key(
    experiment: Experiment, place: Place, request: Mapping[str, object], repeat: int
) -> str:
    """The key of the `repeat`-th identical request at one place (0 for the first)."""
    return _sha(
        {
            "v": KEY_VERSION,
            "experiment": experiment.digest,
            "trial": place.trial,
            "owner": place.owner,
            "repeat": repeat,
            "request": request,
        }
    )


def request_digest(request: Mapping[str, object]) -> str:
    """Identifies a request body alone (counts repeats of one request at one place)."""
    return _sha(request)


class ExchangeRecord(TypedDict):
    """One exchange as the stores keep it (one JSON line each)."""

    key: str
    experiment: str
    scenario_sha: str
    trial: int
    owner: str
    repeat: int
    model: str
    request: JsonObject
    reply: JsonObject
    t: float  # when the reply was used (wall clock)


def record(
    key: str,
    experiment: Experiment,
    place: Place,
    repeat: int,
    request: Mapping[str, JsonValue],
    reply: JsonObject,
) -> ExchangeRecord:
    model = request.get("model")
    return {
        "key": key,
        "experiment": experiment.digest,
        "scenario_sha": experiment.scenario_sha,
        "trial": place.trial,
        "owner": place.owner,
        "repeat": repeat,
        "model": model if isinstance(model, str) else "",
        "request": dict(request),
        "reply": reply,
        "t": time.time(),
    }
