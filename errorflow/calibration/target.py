"""The model a calibration probes: a real backend (openai, anthropic) through
errorflow's own serving (rate limits, the response cache, the traffic log that a
cassette is written from), a recorded calibration replayed from a cassette, or the
simulated model itself with a profile (which the probes must recover: a check of the
probes, not of a model).

Every probe's request is keyed like a run's (errorflow.models.exchange): the experiment
is the calibration (its version, seed and model), the place is (probe index, family).
So the same seed asks the same questions, the response cache answers them again, and a
cassette recorded with `--record` replays them with no server.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pydantic import JsonValue

from errorflow.calibration.probes import Probe
from errorflow.core.errors import InputError
from errorflow.core.seeding import stream
from errorflow.models.backend import InfrastructureError, ModelBackend
from errorflow.models.backends import client_for, wire_for
from errorflow.models.cassette import FORMAT, VERSION, Cassette
from errorflow.models.exchange import Experiment, Place, canonical
from errorflow.models.exchange_store import read_records
from errorflow.models.served_backend import ServedBackend
from errorflow.models.serving import Serving, model_label
from errorflow.models.simulated import SimulatedModel
from errorflow.models.token_estimate import input_tokens
from errorflow.models.wire import Client
from errorflow.scenario.spec.model import ModelSpec
from errorflow.scenario.spec.profiles import Tendencies

#: Bumped when the probes change (a cassette of older probes then misses, saying so).
PROBES_VERSION = 1
#: A reply's output tokens, for a dry run's estimate (a tool call or a short answer).
REPLY_TOKENS = 80


class TargetError(InputError):
    """The model to calibrate cannot be used as given, said in one line."""


def experiment_of(spec: ModelSpec, seed: int) -> Experiment:
    what = {"calibration": PROBES_VERSION, "seed": seed, "model": model_label(spec)}
    digest = hashlib.sha256(canonical(what).encode()).hexdigest()
    return Experiment(digest=digest[:32], scenario_sha=f"calibration-{digest[:12]}")


@dataclass
class Target:
    """Makes each probe's backend; `aclose` when done."""

    spec: ModelSpec
    serving: Serving
    seed: int
    client: Client | None = None
    simulated: Tendencies | None = None

    @property
    def label(self) -> str:
        return "simulated" if self.simulated is not None else model_label(self.spec)

    def backend_for(self, probe: Probe) -> ModelBackend:
        if self.simulated is not None:
            rng = stream(self.seed, "calibrate-model", probe.family, probe.index)
            return SimulatedModel(self.simulated, rng)
        wire = wire_for(self.spec, self.serving)
        place = Place(probe.index, probe.family)
        experiment = experiment_of(self.spec, self.seed)
        return ServedBackend(wire, self.client, self.serving, self.label, experiment, place)

    async def check(self) -> None:
        if self.client is not None:
            try:
                await self.client.check()
            except InfrastructureError as exc:
                raise TargetError(f"{self.label}: {exc}") from None

    async def wait_free(self, wait_s: float) -> str | None:
        """After a probe timed out: None once the server answers again (at once for the
        simulated model or a cassette), else why not, in one line."""
        return None if self.client is None else await self.client.wait_free(wait_s)

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()


def real_target(spec: ModelSpec, serving: Serving, seed: int, api_key: str | None) -> Target:
    client = None
    if serving.calls_servers:
        if not api_key:
            raise TargetError(f"the {spec.backend} backend needs an API key")
        client = client_for(spec, api_key, serving)
    return Target(spec, serving, seed, client)


def estimate_tokens(target: Target, probes: list[Probe]) -> tuple[int, int]:
    """(input, output) tokens of every probe's first request and reply, as the wire
    would send them (a family that wants a final answer may take up to three)."""
    wire = wire_for(target.spec, target.serving)
    total_in = 0
    for probe in probes:
        body, _ = wire.render(probe.request)
        total_in += input_tokens(body)
    return total_in, REPLY_TOKENS * len(probes)


# -- recording ------------------------------------------------------------------------


def recording_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="errorflow-calibrate-"))


def write_cassette(path: Path, traffic: Path, spec: ModelSpec, seed: int, probes: int) -> int:
    """The exchanges of the traffic log as a cassette `--backend replay:FILE` replays
    (the spec is kept in it, so the replay renders the same requests). Returns how many."""
    records = list(read_records(traffic))
    run: dict[str, JsonValue] = {
        "run_id": f"calibration-{seed}", "scenario": "calibration", "seed": seed,
        "trials": probes, "propagation": "-", "label": model_label(spec),
        "scenario_sha": experiment_of(spec, seed).scenario_sha,
        "calibration": spec.model_dump(mode="json", include=_SPEC_FIELDS),
    }  # fmt: skip
    doc = {"format": FORMAT, "version": VERSION, "runs": [run], "exchanges": records}
    path.write_text(json.dumps(doc, ensure_ascii=False) + "\n", encoding="utf-8")
    return len(records)


_SPEC_FIELDS = {"backend", "model", "base_url", "max_tokens", "temperature"}


def replayed_spec(cassette: Cassette) -> tuple[ModelSpec, int]:
    """The model spec and seed a calibration cassette was recorded with."""
    for run in cassette.runs:
        data = dict(run).get("calibration")
        if isinstance(data, dict):
            return ModelSpec.model_validate(data), int(run["seed"])
    raise TargetError(
        f"{cassette.path.name} is not a calibration cassette (written by errorflow "
        "calibrate --record); it recorded " + cassette.recorded()
    )
