"""scenarios/FORMAT.md and the bundled scenarios: every complete example in the
reference, and every bundled file, passes `errorflow validate`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from errorflow.scenario.bundled import bundled
from errorflow.scenario.loader import load, load_text

FORMAT = Path(__file__).resolve().parents[1] / "scenarios" / "FORMAT.md"
EXAMPLES = [
    block
    for block in re.findall(r"```yaml\n(.*?)```", FORMAT.read_text(), re.S)
    if re.search(r"^name:", block, re.M) and re.search(r"^task:", block, re.M)
]


def test_the_reference_has_complete_examples_of_the_new_blocks() -> None:
    text = "\n".join(EXAMPLES)
    for field in (
        "tables:",
        "kind: lookup",
        "kind: search",
        "kind: python",
        "kind: mcp",
        "behaviour:",
        "instructions:",
        "waits_for:",
        "delegates:",
        "{from:",
        "select:",
        "business_failure:",
        "kind: stale",
        "kind: wrong_entity",
        "kind: corrupt",
        "sources:",
        "rate: {from: rate}",
    ):
        assert field in text, field


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_every_complete_example_validates(index: int) -> None:
    load_text(EXAMPLES[index], f"FORMAT.md example {index}")


@pytest.mark.parametrize("name", sorted(bundled()))
def test_every_bundled_scenario_validates(name: str) -> None:
    load(bundled()[name])


def test_validate_passes_a_bundled_scenario_on_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "errorflow", "validate", "support-pipeline"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr  # the bundled files model nothing by mistake
