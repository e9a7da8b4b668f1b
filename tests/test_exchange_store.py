"""The response cache and the traffic log: JSON lines, one file a process."""

from __future__ import annotations

import stat
from pathlib import Path

from errorflow.models.exchange import ExchangeRecord
from errorflow.models.exchange_store import (
    ExchangeLog,
    ResponseCache,
    read_records,
    traffic_dir_for,
)


def rec(key: str, text: str = "hi") -> ExchangeRecord:
    return {
        "key": key,
        "experiment": "e",
        "scenario_sha": "s",
        "trial": 0,
        "owner": "researcher",
        "repeat": 0,
        "model": "m",
        "request": {"model": "m"},
        "reply": {"content": [{"type": "text", "text": text}]},
        "t": 1.0,
    }


def test_a_cache_serves_what_an_earlier_process_stored(tmp_path: Path) -> None:
    first = ResponseCache(tmp_path / "cache")
    assert first.get("k1") is None
    first.put(rec("k1", "one"))
    first.put(rec("k1", "again"))  # a key is stored once: the first reply stays
    later = ResponseCache(tmp_path / "cache")
    assert later.get("k1") == {"content": [{"type": "text", "text": "one"}]}
    assert len(later) == 1 and later.get("k2") is None


def test_files_are_owner_only_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    log = ExchangeLog(tmp_path / "t")
    log.append(rec("a"))
    log.append(rec("b"))
    [path] = list((tmp_path / "t").iterdir())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "t").stat().st_mode) == 0o700
    with path.open("a") as f:
        f.write('{"key": "c", "reply": {"content"')  # a crash mid-line
    assert [r["key"] for r in read_records(tmp_path / "t")] == ["a", "b"]
    assert list(read_records(tmp_path / "missing")) == []


def test_the_traffic_log_sits_next_to_the_store() -> None:
    assert traffic_dir_for(Path("/runs/errorflow.db")) == Path("/runs/errorflow.db.traffic")
