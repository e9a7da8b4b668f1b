"""The limits of YAML read with marks, for a scenario file and for a value given on the
command line alike: nesting, integer digits, Unicode, values a tag cannot hold, keys
that are collections (never built), and alias expansion."""

from __future__ import annotations

import itertools
import time

import pytest

from errorflow.scenario.marked_yaml import (
    MAX_INT_DIGITS,
    MAX_VALUE_NODES,
    MAX_YAML_DEPTH,
    NotYAML,
    ValueBudget,
    parse_yaml,
    read_value,
)
from errorflow.scenario.problems import ScenarioError


def bomb(levels: int = 9) -> str:
    names = [chr(ord("a") + i) for i in range(levels)]
    parts = [f"{names[0]}: &{names[0]} [x, x, x, x, x, x, x, x, x]"]
    for prev, name in itertools.pairwise(names):
        parts.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    return "{" + ", ".join(parts) + "}"


#: text, words of the one problem, (line, column) it points at
LIMITS = {
    "nesting": ("a: " + "[" * 1000, "at most 64 levels of nesting", (1, 4 + MAX_YAML_DEPTH - 1)),
    "nested mappings": ("a: " + "{b: " * 200 + "1" + "}" * 200, "levels of nesting", None),
    "5000 digits": ("seed: " + "9" * 5000, f"at most {MAX_INT_DIGITS} digits", (1, 7)),
    "hex digits": ("seed: 0x" + "f" * 120, f"at most {MAX_INT_DIGITS} digits", (1, 7)),
    "binary digits": ("seed: 0b" + "1" * 400, f"at most {MAX_INT_DIGITS} digits", (1, 7)),
    "surrogate escape": ('name: "\\udcff"', "U+DCFF", (1, 7)),
    "surrogate key": ('"\\ud800": 1', "U+D800", (1, 1)),
    "bad date": ("when: 2024-13-45", "cannot read '2024-13-45' as a timestamp", (1, 7)),
    "bad int tag": ("n: !!int x", "cannot read 'x' as an int", (1, 4)),
    "bad timestamp tag": ("n: !!timestamp x", "as a timestamp", (1, 4)),
    "collection key": (f"? {bomb()}\n: 1", "expected a plain key (a name), found a mapping", None),
    "alias bomb": (f"a: {bomb()}", "YAML nodes", None),
    "long list": ("a: [" + "0," * 100_000 + "0]", "YAML nodes", (1, 99_999)),
}


@pytest.mark.parametrize("case", list(LIMITS))
def test_a_file_over_a_limit_is_one_problem_at_its_place(case: str) -> None:
    text, words, at = LIMITS[case]
    started = time.monotonic()
    with pytest.raises(ScenarioError) as info:
        parse_yaml(text, "f.yaml")
    assert time.monotonic() - started < 30.0  # no blow-up: a guard, not a timing target
    (problem,) = info.value.problems
    assert words in problem.message and len(problem.message) < 300, problem.message
    if at is not None:
        assert (problem.line, problem.column) == at


@pytest.mark.parametrize("case", list(LIMITS))
def test_a_command_line_value_has_the_limits_of_a_file(case: str) -> None:
    text, words, _ = LIMITS[case]
    with pytest.raises(ScenarioError, match="--set x") as info:
        read_value(text, "--set x")
    assert not isinstance(info.value, NotYAML)
    assert words in info.value.problems[0].message


def test_a_value_at_the_limits_is_read() -> None:
    assert read_value("[" * MAX_YAML_DEPTH + "]" * MAX_YAML_DEPTH, "v") is not None
    assert read_value("9" * MAX_INT_DIGITS, "v") == int("9" * MAX_INT_DIGITS)
    assert read_value('"\\u00e9"', "v") == "\u00e9"


@pytest.mark.parametrize(
    ("text", "value"),
    [("3", 3), ("[a, b]", ["a", "b"]), ("", None), ("  ", None), ("# only a note", None)],
)
def test_a_value_reads_as_yaml(text: str, value: object) -> None:
    assert read_value(text, "v") == value


@pytest.mark.parametrize("text", ["[", "a: b: c", "{a: 1", "a\x07b"])
def test_text_that_is_not_yaml_says_so(text: str) -> None:
    with pytest.raises(NotYAML):
        read_value(text, "v")


def test_the_values_of_a_command_line_share_one_budget_of_nodes() -> None:
    """No scenario holds more values than a roll call carries: twelve values of 60,000
    nodes each are refused at the first, each read no further than its budget."""
    budget = ValueBudget()
    assert read_value("[" + "0," * 9_999 + "0]", "--set a", budget) == [0] * 10_000
    assert budget.left == MAX_VALUE_NODES - 10_001
    started = time.monotonic()
    with pytest.raises(ScenarioError, match="in the values of a command line together"):
        read_value("[" + "0," * 60_000 + "0]", "--set b", budget)
    assert time.monotonic() - started < 30.0  # no blow-up: a guard, not a timing target


def test_a_value_larger_than_a_file_is_refused_unparsed() -> None:
    with pytest.raises(ScenarioError, match="expected at most 1,000,000 bytes"):
        read_value("x" * 1_000_001, "v")
    with pytest.raises(ScenarioError, match=r"U\+DCFF"):
        read_value("a\udcffb", "v")  # a byte that was not UTF-8, as Python decodes argv
