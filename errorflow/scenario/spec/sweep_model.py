"""The `sweep:` block: up to three axes and the derived measures computed over them.

An axis names its values, each a set of dotted-path overrides; `errorflow sweep` runs
one cell per combination. A measure (`measures:`) compares every cell with another cell
that differs from it on one axis only: the cell at the named value of that axis, all
other axes at the cell's own values (errorflow.scoring.sweep_measures computes them).
"""

from __future__ import annotations

from pydantic import Field, ValidationError, model_validator

from errorflow.core.shapes import Extended, Strict
from errorflow.scenario.checks.reference_problem import Reference, unknown

#: The most axes a sweep may have (topology × corruption rate × defence fits).
MAX_SWEEP_AXES = 3


class SweepAxis(Strict):
    """One axis of a sweep: a label per value, each a set of dotted-path overrides."""

    name: str = Field(min_length=1, max_length=64)
    values: dict[str, dict[str, object]] = Field(min_length=1, max_length=64)


class CellRef(Strict):
    """A value of one axis: the cell a measure compares against (the other axes at the
    measured cell's values)."""

    axis: str = Field(min_length=1, max_length=64)
    value: str = Field(min_length=1, max_length=200)


class MeasureSpec(Strict):
    against: CellRef


class SweepMeasures(Strict):
    """Derived measures per cell; each is optional, `recovered` needs `drop`."""

    #: Performance drop against a baseline (fault-free) value of an axis.
    drop: MeasureSpec | None = None
    #: Share of the drop a defence recovers, against the no-defence value of an axis.
    recovered: MeasureSpec | None = None
    #: Error amplification (Kim et al.): error rate ÷ the single-agent cell's.
    amplification: MeasureSpec | None = None

    def declared(self) -> dict[str, CellRef]:
        """The declared measures by kind, in the order above."""
        kinds = {
            "drop": self.drop,
            "recovered": self.recovered,
            "amplification": self.amplification,
        }
        return {kind: spec.against for kind, spec in kinds.items() if spec is not None}


class SweepSpec(Extended):
    added_fields = frozenset({"measures"})

    axes: list[SweepAxis] = Field(min_length=1, max_length=MAX_SWEEP_AXES)
    measures: SweepMeasures | None = None

    @model_validator(mode="after")
    def _measures_name_cells(self) -> SweepSpec:
        problems = measure_problems(self)
        if problems:
            raise ValidationError.from_exception_data(
                "SweepSpec", [problem.details() for problem in problems]
            )
        return self


def measure_problems(spec: SweepSpec) -> list[Reference]:
    """Every measure must name an axis of the sweep (axis names unique) and one of its
    values; `recovered` is a share of `drop`, measured along another axis."""
    if spec.measures is None:
        return []
    names = [a.name for a in spec.axes]
    problems = [
        Reference(("axes", i, "name"), f"axis name {name!r} is used twice", name)
        for i, name in enumerate(names)
        if name in names[:i]
    ]
    axes = {a.name: a for a in spec.axes}
    declared = spec.measures.declared()
    for kind, ref in declared.items():
        at = ("measures", kind, "against")
        if ref.axis not in axes:
            problems.append(Reference((*at, "axis"), unknown("axis", ref.axis, axes), ref.axis))
        elif ref.value not in axes[ref.axis].values:
            message = unknown(f"value of axis {ref.axis!r}", ref.value, axes[ref.axis].values)
            problems.append(Reference((*at, "value"), message, ref.value))
    recovered, drop = declared.get("recovered"), declared.get("drop")
    if recovered is not None and drop is None:
        message = "`recovered` is a share of the drop: declare `drop` too"
        problems.append(Reference(("measures", "recovered"), message, None))
    elif recovered is not None and drop is not None and recovered.axis == drop.axis:
        message = f"`recovered` and `drop` both measure along axis {drop.axis!r}; expected two axes"
        problems.append(Reference(("measures", "recovered", "against", "axis"), message, None))
    return problems
