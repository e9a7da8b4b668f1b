"""Cassettes: which exchanges are a run's, redacted; and reading one back."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from errorflow.models.cassette import (
    MAX_CASSETTE_BYTES,
    Cassette,
    CassetteError,
    RecordedRun,
    RunWindow,
    cassette_document,
)
from errorflow.models.exchange import ExchangeRecord

SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c"
RUN: RecordedRun = {
    "run_id": "r1",
    "scenario": "contamination",
    "seed": 3,
    "trials": 2,
    "propagation": "explicit",
    "label": None,
    "scenario_sha": "sha-a",
}


def rec(key: str, sha: str = "sha-a", t: float = 100.0, text: str = "ok") -> ExchangeRecord:
    return {
        "key": key,
        "experiment": "exp-a",
        "scenario_sha": sha,
        "trial": 0,
        "owner": "researcher",
        "repeat": 0,
        "model": "m",
        "request": {"messages": [{"role": "user", "content": f"error key={SECRET}"}]},
        "reply": {"content": [{"type": "text", "text": text}]},
        "t": t,
    }


def test_a_runs_exchanges_are_its_scenarios_within_its_time_redacted() -> None:
    window = RunWindow(RUN, started=99.5, finished=200.0)
    records = [
        rec("k1", text=f"the key is {SECRET}"),
        rec("k1", text="a later rerun's reply"),  # the first reply of a key is the run's
        rec("k2", sha="sha-b"),  # another experiment
        rec("k3", t=500.0),  # the same experiment, run again later
        rec("k4", t=99.0),  # within the slack before the start
    ]
    doc = cassette_document([window], records)
    exchanges = doc["exchanges"]
    assert isinstance(exchanges, list)
    assert [e["key"] for e in exchanges] == ["k1", "k4"]  # type: ignore[index]
    assert SECRET not in json.dumps(doc)
    assert doc["runs"] == [RUN]


def test_a_cassette_reads_back_its_replies(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    doc = cassette_document([RunWindow(RUN, 0.0, None)], [rec("k1"), rec("k2")])
    path.write_text(json.dumps(doc))
    cassette = Cassette.load(path)
    assert cassette.get("k1") == {"content": [{"type": "text", "text": "ok"}]}
    assert cassette.get("nope") is None
    assert cassette.experiments == {"exp-a"}
    assert cassette.recorded() == "contamination seed 3"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("not json", "is not JSON"),
        ('{"format": "other"}', "is not an errorflow cassette"),
        ('{"format": "errorflow-cassette", "version": 9}', "cassette version 9"),
    ],
)
def test_a_file_that_is_no_cassette_says_so(tmp_path: Path, content: str, said: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(content)
    with pytest.raises(CassetteError, match=said):
        Cassette.load(path)
    with pytest.raises(CassetteError, match="cannot read"):
        Cassette.load(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("device", "is a character device"),
        ("fifo", "is a named pipe"),  # no writer: reading would block for ever
        ("huge", f"at most {MAX_CASSETTE_BYTES:,} bytes"),
        ("nested", "nested too deeply"),
        ("not utf-8", "is not JSON"),
    ],
)
def test_a_cassette_path_is_a_regular_file_read_in_bounded_memory(
    tmp_path: Path, kind: str, said: str
) -> None:
    path = tmp_path / "c.json"
    if kind == "device":
        path = Path("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "huge":
        with path.open("wb") as f:
            f.truncate(13 << 30)
    elif kind == "nested":
        path.write_text("[" * 100_000)
    else:
        path.write_bytes(b'{"format": "\xff"}')
    with pytest.raises(CassetteError, match=said) as info:
        Cassette.load(path)
    assert "\n" not in str(info.value)
