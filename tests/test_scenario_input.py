"""Every source of a scenario on the command line (a file, `--set`, the run settings) is
checked as `validate` checks a file: exit 2, one problem a line naming where it came
from, no traceback, no pydantic dump; nothing is read that is not a regular file."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from errorflow.cli.main import main
from errorflow.scenario.bundled import bundled

#: A broken reader (the whole of /dev/zero) fails fast under this, instead of eating
#: the machine's memory.
_MEMORY_LIMIT = 1 << 30


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (_MEMORY_LIMIT, _MEMORY_LIMIT))


def _errorflow(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "60", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "errorflow", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,  # a FIFO used to block its reader for ever
        preexec_fn=_limit_memory,
    )


def _refused(proc: subprocess.CompletedProcess[str], *words: str) -> list[str]:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "pydantic.dev" not in proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr
    return proc.stderr.strip().splitlines()


# -- files ---------------------------------------------------------------------------------


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_is_refused_unread(device: str) -> None:
    if not Path(device).exists():
        pytest.skip(f"no {device}")
    _refused(_errorflow("validate", device), device, "character device", "regular file")


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "scenario.yaml"
    os.mkfifo(fifo)
    _refused(_errorflow("validate", str(fifo)), "named pipe (FIFO)", "regular file")


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    sparse = tmp_path / "huge.yaml"
    with sparse.open("wb") as f:
        f.truncate(4 << 30)  # 4 GB of holes: reading it would exceed the memory limit
    _refused(_errorflow("validate", str(sparse)), "expected at most 1000000 bytes", "4294967296")


@pytest.mark.parametrize(
    ("content", "column", "words"),
    [
        (b'name: "a\x07b"\n', 9, ["control character U+0007"]),
        ("name: a\x80b\n".encode(), 8, ["control character U+0080"]),
        ("name: a  # \ufffe\n".encode(), 12, ["character U+FFFE"]),
    ],
    ids=["bel", "c1", "fffe"],
)
def test_a_character_yaml_does_not_allow_is_reported_at_its_place(
    tmp_path: Path, content: bytes, column: int, words: list[str]
) -> None:
    path = tmp_path / "f.yaml"
    path.write_bytes(content)
    lines = _refused(_errorflow("validate", str(path)), *words)
    assert lines[1].startswith(f"{path}:1:{column}: "), lines


def test_trials_true_is_an_error(tmp_path: Path) -> None:
    text = bundled()["contamination"].read_text()
    path = tmp_path / "t.yaml"
    path.write_text(text.replace("trials: ", "trials: true #", 1))
    _refused(_errorflow("validate", str(path)), "trials: expected an integer, found true")


def test_validate_refuses_a_scenario_whose_roll_call_cannot_travel(tmp_path: Path) -> None:
    data = yaml.safe_load(bundled()["contamination"].read_text())
    path = tmp_path / "big.yaml"
    data = {"description": "x" * 300_000} | {k: v for k, v in data.items() if k != "description"}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    lines = _refused(_errorflow("validate", str(path)), "does not fit on the bus")
    assert lines[1].startswith(f"{path}:1:1: description: "), lines


# -- --set and the run settings ------------------------------------------------------------


def _cli(capfd: pytest.CaptureFixture[str], *args: str) -> list[str]:
    code = main(list(args))
    err = capfd.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and "pydantic.dev" not in err and "validation error" not in err
    return err.strip().splitlines()


SET_CASES = {
    "unknown strategy": (
        "agents.researcher.policy.strategy=yolo",
        "unknown strategy 'yolo'",
    ),
    "no attempt": (
        "agents.researcher.policy.retry.max_attempts=0",
        "expected a value from 1 to 100, found 0",
    ),
    "steps beyond the limit": (
        "agents.researcher.policy.guards.max_steps=5000",
        "expected at most 1000 steps per task",
    ),
    "need argument": ("task.needs.0.arg=nosuch", "takes no argument 'nosuch'"),
    "a boolean for a count": (
        "agents.researcher.policy.retry.max_attempts=true",
        "expected an integer, found true (a boolean)",
    ),
    "trials not a number": ("trials=abc", "expected an integer, found 'abc' (a string)"),
    "trials a boolean": ("trials=true", "expected an integer, found true (a boolean)"),
}


@pytest.mark.parametrize("case", list(SET_CASES))
def test_a_bad_set_is_one_line_naming_it(
    case: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    spec, words = SET_CASES[case]
    db = tmp_path / "x.db"
    # --trials as well: it used to hide a bad `--set trials=` until a pydantic dump
    lines = _cli(capfd, "run", "contamination", "--set", spec, "--trials", "2", "--db", str(db))
    assert lines == [lines[0]] and lines[0].startswith(f"error: invalid scenario: --set {spec}: ")
    assert words in lines[0]
    assert not db.exists()  # refused before anything started


def test_a_document_over_the_limit_is_refused_and_the_option_shortened(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    spec = "world.documents={d: " + "x" * 70_000 + "}"
    (line,) = _cli(capfd, "run", "contamination", "--set", spec, "--db", str(tmp_path / "x.db"))
    assert "world.documents.d: expected a document of at most 65536 bytes" in line
    assert len(line) < 400  # the 70 KB value is not repeated


def test_every_problem_of_the_sets_is_a_line(capfd: pytest.CaptureFixture[str]) -> None:
    lines = _cli(
        capfd,
        "run",
        "contamination",
        "--set",
        "trials=0",
        "--set",
        "seed=-1",
    )
    assert lines[0].startswith("error: invalid scenario: --set seed=-1: ")
    assert lines[1].startswith("--set trials=0: expected a value from 1")
    assert len(lines) == 2


def test_the_agent_command_checks_its_sets_too(capfd: pytest.CaptureFixture[str]) -> None:
    lines = _cli(
        capfd,
        "agent",
        "contamination",
        "--name",
        "writer",
        "--broker",
        "mqtt://127.0.0.1:1",
        "--run",
        "r",
        "--set",
        "agents.writer.policy.guards.max_steps=5000",
    )
    assert "--set agents.writer.policy.guards.max_steps=5000" in lines[0]
    assert "expected at most 1000 steps" in lines[0]


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("seed=" + "9" * 5000, "expected an integer of at most 100 digits"),
        ("world=" + "{a: " * 300, "expected at most 64 levels of nesting"),
        ("task.prompt=2024-13-45", "cannot read '2024-13-45' as a timestamp"),
        ("a" + ".b" * 100 + "=1", "expected a path of at most 64 fields, found 101"),
    ],
    ids=["digits", "nesting", "date", "path"],
)
def test_a_set_over_a_files_limits_is_one_short_line_naming_it(
    spec: str, said: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "x.db"
    (line,) = _cli(capfd, "run", "contamination", "--set", spec, "--db", str(db))
    assert line.startswith(f"error: {'invalid scenario: ' * ('path' not in said)}--set ")
    assert said in line and len(line) < 300
    assert not db.exists()


def test_thousands_of_bad_sets_are_three_lines_in_linear_time(
    capfd: pytest.CaptureFixture[str],
) -> None:
    sets = [word for i in range(3000) for word in ("--set", f"world.x{i}=1")]
    started = time.monotonic()
    lines = _cli(capfd, "run", "contamination", *sets)
    assert time.monotonic() - started < 30.0
    assert lines[0].startswith("error: invalid scenario: --set world.x0=1: unknown key 'x0'")
    assert lines[1].startswith("--set world.x1=1: ") and lines[2] == "(and 2,998 more problems)"
