"""The fault families' table (errorflow.faults.registry): every family and kind is there,
and the scenario reference documents each kind."""

from __future__ import annotations

from pathlib import Path

from errorflow.faults.registry import FAMILIES, family

FORMAT = Path(__file__).resolve().parent.parent / "scenarios" / "FORMAT.md"


def test_the_families_and_where_a_scenario_writes_them() -> None:
    assert [(f.name, f.place) for f in FAMILIES] == [
        ("tool", "tools.NAME.faults"),
        ("agent", "agents.NAME.faults"),
        ("crash", "agents.NAME.faults"),
        ("model", "agents.NAME.model.faults"),
        ("bus", "bus"),
    ]
    assert list(family("model").kinds) == ["rate_limit", "overloaded", "server_error", "timeout"]
    assert list(family("agent").kinds) == ["corrupt", "faulty", "drop", "hang", "slow"]


def test_the_reference_documents_every_kind() -> None:
    text = FORMAT.read_text()
    missing = [f"{f.name}.{k}" for f in FAMILIES for k in f.kinds if f"`{k}`" not in text]
    assert missing == []
