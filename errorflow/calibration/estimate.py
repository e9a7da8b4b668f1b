"""From classified replies to estimates, and from estimates to a profile file.

Each parameter's estimate is successes / classified probes with its 95 % Wilson
interval (errorflow.scoring.stats). A parameter no probe classified (none was asked,
or no reply said anything about it) keeps the base profile's value, marked assumed and
saying why; so does every parameter the probes do not cover.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from statistics import NormalDist

from errorflow.calibration.probes import FAMILIES, FAMILY_OF
from errorflow.calibration.session import ProbeResult
from errorflow.scenario.provenance.origin import Entry, Measured
from errorflow.scenario.provenance.profile_file import BEHAVIOUR_FIELDS, ProfileDoc
from errorflow.scenario.provenance.view import profile_view
from errorflow.scoring.stats import wilson


@dataclass(frozen=True)
class Estimate:
    parameter: str
    family: str
    successes: int
    probes: int  # classified
    unclassified: int
    confidence: float = 0.95

    @property
    def value(self) -> float | None:
        return self.successes / self.probes if self.probes else None

    @property
    def interval(self) -> tuple[float, float]:
        z = NormalDist().inv_cdf(1 - (1 - self.confidence) / 2)
        return wilson(self.successes, self.probes, z)


@dataclass(frozen=True)
class Model:
    """Which model was probed, as the profile names it."""

    model: str
    backend: str
    server: str | None
    date: str


def estimates(results: Iterable[ProbeResult], confidence: float = 0.95) -> dict[str, Estimate]:
    """Every parameter some probe family covers, in the profile's order, each with its
    interval at `confidence`."""
    counts: dict[str, list[int]] = {}
    for result in results:
        for param, verdict in result.verdicts.items():
            c = counts.setdefault(param, [0, 0, 0])
            if verdict is None:
                c[2] += 1
            else:
                c[0] += int(verdict)
                c[1] += 1
    ordered = [p for family in FAMILIES.values() for p in family if p in counts]
    return {
        p: Estimate(p, FAMILY_OF[p], counts[p][0], counts[p][1], counts[p][2], confidence)
        for p in ordered
    }


def profile_of(
    name: str, found: dict[str, Estimate], model: Model, base: str = "small-local"
) -> ProfileDoc:
    """The profile file of a calibration: measured where a probe classified a reply,
    the base profile's value (assumed, with the reason) elsewhere."""
    fallback = profile_view(base, {}, None)
    params: dict[str, Entry] = {}
    for field in BEHAVIOUR_FIELDS:
        est = found.get(field)
        if est is not None and est.value is not None:
            low, high = est.interval
            measured = Measured(
                model=model.model, backend=model.backend, server=model.server, date=model.date,
                family=est.family, probes=est.probes, successes=est.successes,
                interval=[round(low, 4), round(high, 4)], unclassified=est.unclassified,
                confidence=est.confidence,
            )  # fmt: skip
            params[field] = Entry(value=round(est.value, 4), measured=measured)
            continue
        why = (
            f"not measured: none of {est.unclassified} probes ({est.family}) could be "
            f"classified; the value of {base}"
            if est is not None
            else f"not probed; the value of {base}"
        )
        value = fallback.values[field]
        assert isinstance(value, float)
        params[field] = Entry(value=value, assumed=why)
    description = (
        f"Calibrated by errorflow calibrate on {model.model} ({model.backend}) on {model.date}."
    )
    return ProfileDoc(
        format="errorflow-profile", version=1, name=name, description=description,
        parameters=params,
    )  # fmt: skip
