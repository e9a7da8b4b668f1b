"""Estimates from classified probes: counts per parameter, Wilson intervals at the
confidence asked for."""

from __future__ import annotations

from typing import Any, cast

import pytest
from statsmodels.stats.proportion import proportion_confint

from errorflow.calibration.estimate import estimates
from errorflow.calibration.session import ProbeResult


def results(verdicts: list[bool | None]) -> list[ProbeResult]:
    probe = cast(Any, None)  # estimates read only the verdicts
    return [ProbeResult(probe, {"p_repair_without_options": v}) for v in verdicts]


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.995, 0.999])
def test_the_interval_is_wilson_at_the_confidence_asked_for(confidence: float) -> None:
    found = estimates(results([True] * 16 + [False] * 44 + [None] * 3), confidence)
    est = found["p_repair_without_options"]
    assert (est.successes, est.probes, est.unclassified) == (16, 60, 3)
    expected = proportion_confint(16, 60, alpha=1 - confidence, method="wilson")
    assert est.interval == pytest.approx(expected, abs=1e-9)


def test_a_higher_confidence_widens_the_interval() -> None:
    verdicts: list[bool | None] = [True] * 16 + [False] * 44
    low95, high95 = estimates(results(verdicts), 0.95)["p_repair_without_options"].interval
    low999, high999 = estimates(results(verdicts), 0.999)["p_repair_without_options"].interval
    assert low999 < low95 and high999 > high95
