"""Where a behaviour parameter of the simulated model came from.

Three answers, and every parameter of every profile gives one:

- `measured`: probed on a named model by `errorflow calibrate` (model, backend, server,
  date, probes, successes and the 95 % Wilson interval of the estimate);
- `fitted`: taken from a published table (which table, the model it measured, its
  counts), so a scenario that reproduces that table is calibrated on its own data;
- `assumed`: nobody measured it; the reason says why the value is what it is.

A scenario's `params` override is a fourth origin (`set in the scenario`), added where
a profile is shown (errorflow.scenario.provenance.view), never written in a file.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from errorflow.core.shapes import Strict

Count = Annotated[int, Field(ge=0)]


class Measured(Strict):
    """A calibration's estimate: `successes` of `probes` classified replies."""

    model: str = Field(min_length=1, max_length=200)
    backend: str = Field(min_length=1, max_length=64)
    server: str | None = Field(default=None, max_length=300)
    date: str = Field(min_length=1, max_length=40)
    family: str = Field(min_length=1, max_length=64, description="the probe family")
    probes: Count
    successes: Count
    interval: list[float] = Field(min_length=2, max_length=2)
    #: The interval's confidence level (Wilson score interval).
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0)
    #: Probes whose reply could not be classified (prose, no call): not in `probes`.
    unclassified: Count = 0

    @model_validator(mode="after")
    def _consistent(self) -> Measured:
        low, high = self.interval
        if self.successes > self.probes:
            raise ValueError(f"successes ({self.successes}) exceed probes ({self.probes})")
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError(f"interval [{low}, {high}] is not within [0, 1] in order")
        return self


class Fitted(Strict):
    """A value read off a published table (`source`), with the counts it rests on."""

    source: str = Field(min_length=1, max_length=300)
    model: str = Field(min_length=1, max_length=200)
    successes: Count
    trials: Count
    note: str = Field(default="", max_length=500)


def _exactly_one(block: Origin | Entry) -> None:
    given = [k for k in ("measured", "fitted", "assumed") if getattr(block, k) is not None]
    if len(given) != 1:
        found = " and ".join(given) if given else "none"
        raise ValueError(f"give exactly one of measured, fitted or assumed (found {found})")


class Origin(Strict):
    """One of `measured`, `fitted` or `assumed` (the reason), exactly one."""

    measured: Measured | None = None
    fitted: Fitted | None = None
    assumed: str | None = Field(default=None, min_length=1, max_length=500)

    @model_validator(mode="after")
    def _exactly_one(self) -> Origin:
        _exactly_one(self)
        return self

    @property
    def kind(self) -> Literal["measured", "fitted", "assumed"]:
        if self.measured is not None:
            return "measured"
        return "fitted" if self.fitted is not None else "assumed"

    def summary(self) -> str:
        """One line: where the value came from."""
        m, f = self.measured, self.fitted
        if m is not None:
            low, high = m.interval
            where = f" @ {m.server}" if m.server else ""
            return (
                f"measured on {m.model}{where} ({m.backend}, {m.date}): {m.successes}/"
                f"{m.probes} probes, {m.confidence:.1%} CI {low:.2f}-{high:.2f}".replace(".0%", "%")
            )
        if f is not None:
            return f"fitted to {f.source} ({f.model}): {f.successes}/{f.trials}" + (
                f"; {f.note}" if f.note else ""
            )
        return f"assumed: {self.assumed}"


class Entry(Strict):
    """One parameter in a profile file: its value and where it came from."""

    value: float
    measured: Measured | None = None
    fitted: Fitted | None = None
    assumed: str | None = Field(default=None, min_length=1, max_length=500)

    @model_validator(mode="after")
    def _exactly_one(self) -> Entry:
        _exactly_one(self)
        return self

    @property
    def origin(self) -> Origin:
        return Origin(measured=self.measured, fitted=self.fitted, assumed=self.assumed)
