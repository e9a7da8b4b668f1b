"""Hostile values from outside a scenario file, as a user's shell gives them to every
command: each is bad input (exit 2) said in one to three short lines, with no traceback,
within 5 s, in bounded memory (the child runs under a 1 GB address-space limit, so a
value that expands or a file that never ends fails the test instead of the machine).

The cases stand for classes, one or more per command: a `--set`/`--vary` value over a
scenario file's limits (alias expansion, nesting, integer digits, Unicode), a word that
is not UTF-8, a path option naming a device, a FIFO, a directory or binary data, a URL
that names no server, a number that is none (too many digits, infinite), an id that
cannot be a topic level, an output nobody reads.
"""

from __future__ import annotations

import itertools
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from errorflow.protocol.signing import new_key, write_key_file
from errorflow.scenario.bundled import bundled

#: The child's address space: far above what errorflow needs, far below what a YAML
#: bomb or /dev/zero read whole takes.
MEMORY_LIMIT = 1 << 30
TIME_LIMIT_S = 30.0  # a hang guard (a FIFO, a blow-up), not a timing target
#: A line a person reads (a value of a megabyte is shown by its start and length).
LINE_LIMIT = 1000


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def alias_bomb(levels: int = 9) -> str:
    """A flow mapping of ~500 bytes whose aliases expand to 9**levels strings."""
    names = [chr(ord("a") + i) for i in range(levels)]
    parts = [f"{names[0]}: &{names[0]} [x, x, x, x, x, x, x, x, x]"]
    for prev, name in itertools.pairwise(names):
        parts.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    return "{" + ", ".join(parts) + "}"


@dataclass(frozen=True)
class Places:
    """What the cases refer to: `{fifo}`, `{db}` (a store with run `abc`)..."""

    fifo: Path
    binary_key: Path
    db: Path
    work: Path
    port: int

    def fill(self, word: str) -> str:
        named = {"fifo": self.fifo, "key": self.binary_key, "db": self.db, "work": self.work}
        for name, value in {**named, "port": self.port}.items():
            word = word.replace("{" + name + "}", str(value))
        return word


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Places]:
    work = tmp_path_factory.mktemp("hostile")
    fifo = work / "fifo"
    os.mkfifo(fifo)
    binary_key = work / "binary.key"
    binary_key.write_bytes(bytes(range(256)) * 4)
    binary_key.chmod(0o600)
    write_key_file(work / "good.key", new_key())
    db = work / "s.db"
    made = subprocess.run(
        [sys.executable, "-m", "errorflow", "run", "contamination", "--trials", "1", "-q",
         "--run-id", "abc", "--db", str(db)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    big = work / "long-name.yaml"  # a name of ~999 KB, and nothing else
    big.write_text("name: " + "n" * 999_000 + "\n")
    digits = work / "digits.yaml"
    digits.write_text(
        bundled()["contamination"].read_text().replace("seed: 3", "seed: " + "9" * 5000)
    )
    (work / "flat.yaml").write_text("a: [" + "0," * 490_000 + "0]\n")  # under 1 MB
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    yield Places(fifo, binary_key, db, work, port)


RUN = ["run", "contamination", "--trials", "1", "-q", "--db", "{db}"]
AGENT = ["agent", "contamination", "--name", "writer", "--broker", "mqtt://127.0.0.1:{port}",
         "--run", "r", "--key-file", "{work}/good.key"]  # fmt: skip
KEYED = {"ERRORFLOW_RUN_KEY": new_key().hex()}

#: name: (arguments, words stderr must hold). `{...}`: see `Places`.
CASES: dict[str, tuple[list[str], list[str]]] = {
    # --set / --vary: the limits of a scenario file
    "set alias bomb": ([*RUN, "--set", "world.metrics=" + alias_bomb()], ["YAML nodes"]),
    "set nesting": ([*RUN, "--set", "name=" + "[" * 1000], ["levels of nesting"]),
    "set nested mapping": ([*RUN, "--set", "world=" + "{a: " * 500], ["levels of nesting"]),
    "set 5000 digits": ([*RUN, "--set", "seed=" + "9" * 5000], ["at most 100 digits"]),
    "set hex digits": ([*RUN, "--set", "seed=0x" + "f" * 5000], ["at most 100 digits"]),
    "set surrogate escape": ([*RUN, "--set", 'task.prompt="\\udcff"'], ["U+DCFF"]),
    "set bad date": ([*RUN, "--set", "task.prompt=2024-13-45"], ["as a timestamp"]),
    "set negative index": ([*RUN, "--set", "task.needs.-1.arg=x"], ["not a list index"]),
    "set deep path": ([*RUN, "--set", "a" + ".a" * 5000 + "=1"], ["at most 64 fields"]),
    "sets of 60,000 nodes each": (
        [*RUN, *(w for i in range(12) for w in ("--set", f"world.x{i}=[{'0,' * 60_000}0]"))],
        ["20000 YAML nodes in the values of a command line together"],
    ),
    "set many problems": (
        [*RUN, *(w for i in range(2000) for w in ("--set", f"world.x{i}=1"))],
        ["unknown key", "more problems"],
    ),
    "vary bomb": (
        ["sweep", "contamination", "--db", "{db}", "--vary", "seed=1," + "[" * 1000],
        ["levels of nesting"],
    ),
    "vary too many values": (
        [
            "sweep",
            "contamination",
            "--db",
            "{db}",
            "--vary",
            "seed=" + ",".join(map(str, range(999))),
        ],
        ["at most 64 items"],
    ),
    "tui set digits": (["tui", "contamination", "--set", "seed=" + "7" * 4400], ["100 digits"]),
    "agent set bomb": ([*AGENT, "--set", "world.metrics=" + alias_bomb()], ["YAML nodes"]),
    # files named on the command line: a regular file of a bounded size, or refused
    "key file device": ([*RUN, "--key-file", "/dev/zero"], ["character device"]),
    "key file fifo": ([*RUN, "--key-file", "{fifo}"], ["named pipe"]),
    "key file binary": ([*RUN, "--key-file", "{key}"], ["not text"]),
    "agent key device": ([*AGENT[:-1], "/dev/zero"], ["character device"]),
    "worker key fifo": (
        ["worker", "--broker", "mqtt://127.0.0.1:{port}", "--key-file", "{fifo}"],
        ["named pipe"],
    ),
    "tui attach key device": (
        ["tui", "--attach", "r", "--broker", "mqtt://127.0.0.1:{port}", "--key-file", "/dev/zero"],
        ["character device"],
    ),
    "replay device": ([*RUN, "--backend", "replay:/dev/zero"], ["character device"]),
    "replay fifo": ([*RUN, "--backend", "replay:{fifo}"], ["named pipe"]),
    "cache not a directory": ([*RUN, "--cache", "{fifo}"], ["not a directory"]),
    "ca file device": (
        [*RUN, "--broker", "mqtts://127.0.0.1:1?ca=/dev/zero"],
        ["character device"],
    ),
    "scenario name too long": (["validate", "x" * 300], ["at most 255 bytes"]),
    "scenario with 5000 digits": (["validate", "{work}/digits.yaml"], ["100 digits"]),
    "scenario of 490,000 nodes": (["validate", "{work}/flat.yaml"], ["50000 YAML nodes"]),
    "999 KB name, and no agents": (["validate", "{work}/long-name.yaml"], ["64 characters"]),
    "999 KB name, run": (["run", "{work}/long-name.yaml", "--db", "{db}"], ["64 characters"]),
    # outputs
    "report to a fifo": (["report", "abc", "--db", "{db}", "-o", "{fifo}"], ["nobody reads"]),
    "report to a directory": (["report", "abc", "--db", "{db}", "-o", "{work}"], ["directory"]),
    "export to a fifo": (
        ["export", "abc", "--db", "{db}", "--format", "otlp-json", "-o", "{fifo}"],
        ["nobody reads"],
    ),
    "export traffic device": (
        ["export", "abc", "--db", "{db}", "--format", "cassette", "--traffic", "/dev/zero"],
        ["not a directory"],
    ),
    # URLs
    "broker unclosed bracket": ([*RUN, "--broker", "mqtt://[::1"], ["--broker", "IPv6"]),
    "broker port 0": ([*RUN, "--broker", "mqtt://127.0.0.1:0"], ["1-65535", "'0'"]),
    "broker newline": ([*RUN, "--broker", "mqtt://h\n:1883"], ["U+000A"]),
    "base_url": ([*RUN, "--set", "agents.writer.model.base_url=http://[::1"], ["base_url"]),
    "otlp port 0": (["export", "abc", "--db", "{db}", "--otlp", "http://127.0.0.1:0"], ["1-65535"]),
    # numbers and ids
    "trial of 20 digits": (["trace", "abc", "--db", "{db}", "--trial", "9" * 20], ["18 digits"]),
    "wait nan": ([*RUN, "--wait", "nan"], ["finite"]),
    "rpm inf": ([*RUN, "--rpm", "inf"], ["finite"]),
    "price inf": ([*RUN, "--price", "m=1e999/1", "--dry-run"], ["finite"]),
    "speed inf": (["tui", "--replay", "abc", "--db", "{db}", "--speed", "inf"], ["finite"]),
    "run id wildcard": ([*RUN, "--run-id", "a/#"], ["one topic level"]),
    "run id newline": ([*RUN, "--run-id", "a\nb"], ["one topic level"]),
    "worker run wildcard": (
        ["worker", "--broker", "mqtt://127.0.0.1:{port}", "--run", "+"],
        ["one topic level"],
    ),
    "client from the environment": ([*RUN, "--trials", "1"], ["ERRORFLOW_MQTT_CLIENT"]),
}
#: Extra environment of a case.
ENV = {
    "client from the environment": {"ERRORFLOW_MQTT_CLIENT": "zmq"},
    "worker key fifo": KEYED,
    "worker run wildcard": KEYED,
}


def errorflow(
    args: list[str], env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[bytes], float]:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "errorflow", *args],
        capture_output=True,
        env={**os.environ, "COLUMNS": "80", "NO_COLOR": "1", **env},
        timeout=60,  # a FIFO used to block its reader for ever
        preexec_fn=_limit_memory,
    )
    return proc, time.monotonic() - started


def assert_refused(proc: subprocess.CompletedProcess[bytes], took: float, *words: str) -> None:
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2, err[-2000:]
    lines = err.strip().splitlines()
    assert 1 <= len(lines) <= 3, err[:3000]
    assert "Traceback" not in err and lines[0].startswith("error: "), err[:3000]
    assert all(len(line) <= LINE_LIMIT for line in lines), [len(x) for x in lines]
    for word in words:
        assert word in err, err
    assert took < TIME_LIMIT_S, f"took {took:.1f}s"


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_value_is_bad_input_in_three_lines(case: str, places: Places) -> None:
    args, words = CASES[case]
    proc, took = errorflow([places.fill(a) for a in args], ENV.get(case, {}))
    assert_refused(proc, took, *words)


def test_a_word_that_is_not_utf8_is_refused_for_every_option(places: Places) -> None:
    """The shell hands bytes over; Python decodes bad ones as surrogates."""
    lines: list[list[str | bytes]] = [
        [*RUN, "--set", b"task.prompt=\xff\xfe"],
        ["validate", b"caf\xe9.yaml"],
        ["show", b"r\x80", "--db", "{db}"],
        [*RUN, "--run-id", b"\xc3"],
    ]
    for args in lines:
        words = [places.fill(os.fsdecode(a) if isinstance(a, bytes) else a) for a in args]
        proc, took = errorflow(words, {})
        assert_refused(proc, took, "expected UTF-8 text", "0x")
