"""The argument types every command shares: whole numbers in ASCII digits that fit a
64-bit integer, finite numbers, bounded waits and run ids that are one topic level."""

from __future__ import annotations

import argparse

import pytest

from errorflow.cli.args import (
    MAX_WHOLE_DIGITS,
    nonneg_float,
    positive,
    positive_float,
    run_id_arg,
    wait_seconds,
    whole,
)


@pytest.mark.parametrize(
    "text", ["1_000", " 7", "\u0661", "1e3", "", "9" * (MAX_WHOLE_DIGITS + 1), "9" * 5000]
)
def test_a_whole_number_is_ascii_digits_that_fit(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as info:
        whole(text)
    assert len(str(info.value)) < 120


def test_whole_numbers_within_the_limits() -> None:
    assert whole("9" * MAX_WHOLE_DIGITS) == int("9" * MAX_WHOLE_DIGITS) < 2**63
    assert whole("-3") == -3 and positive("+4") == 4


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e999", "1_0", "\u0661", "1" * 400])
def test_a_number_is_finite(text: str) -> None:
    for kind in (nonneg_float, positive_float, wait_seconds):
        with pytest.raises(argparse.ArgumentTypeError, match="finite") as info:
            kind(text)
        assert len(str(info.value)) < 120


def test_bounds_of_numbers_and_waits() -> None:
    assert nonneg_float("0") == 0 and positive_float("0.5") == 0.5
    with pytest.raises(argparse.ArgumentTypeError, match="above 0"):
        wait_seconds("0")
    with pytest.raises(argparse.ArgumentTypeError, match="a day"):
        wait_seconds("1e9")
    assert wait_seconds("60") == 60


@pytest.mark.parametrize("text", ["a/b", "+", "#", "a b", "a\nb", "", "r" * 81, "caf\u00e9"])
def test_a_run_id_is_one_topic_level(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="one topic level") as info:
        run_id_arg(text)
    assert len(str(info.value)) < 200


def test_a_generated_run_id_is_a_run_id() -> None:
    from errorflow.runtime.runner import new_run_id

    assert run_id_arg(new_run_id("n" * 64)) and run_id_arg("abc-1.2_x")
