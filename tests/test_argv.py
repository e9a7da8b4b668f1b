"""Every word of a command line is UTF-8 text no larger than a scenario file, checked
before any command reads it: one line naming the word, exit code 2."""

from __future__ import annotations

import os

import pytest

from errorflow.cli.argv import MAX_WORD_BYTES, check_words
from errorflow.cli.errors import UsageError
from errorflow.cli.main import main
from errorflow.scenario.scenario_file import MAX_SCENARIO_BYTES


@pytest.mark.parametrize(
    ("word", "said"),
    [
        (os.fsdecode(b"name=\xff\xfe"), "found the byte 0xff at character 6"),
        (os.fsdecode(b"caf\xe9.yaml"), "found the byte 0xe9 at character 4"),
        ("a\ud800", "U+D800, half of a surrogate pair"),  # given so, not from bytes
    ],
)
def test_a_word_that_is_not_utf8_names_its_byte(word: str, said: str) -> None:
    with pytest.raises(UsageError) as info:
        check_words(["run", "x", "--set", word])
    text = info.value.text
    assert said in text and text.startswith("argument 4 (") and "\n" not in text


def test_a_word_larger_than_a_scenario_file_is_refused_and_not_repeated() -> None:
    assert MAX_WORD_BYTES == MAX_SCENARIO_BYTES
    with pytest.raises(UsageError) as info:
        check_words(["--set", "name=" + "n" * MAX_WORD_BYTES])
    assert "found 1,000,005" in info.value.text and len(info.value.text) < 300


def test_main_refuses_before_any_command_runs(capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", os.fsdecode(b"\x80.yaml")]) == 2
    (line,) = capfd.readouterr().err.strip().splitlines()
    assert line.startswith("error: argument 2 (\\x80.yaml): expected UTF-8 text")
