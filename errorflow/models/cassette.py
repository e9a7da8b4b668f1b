"""Recorded sessions: a run's model traffic in one file, to replay with no server.

`errorflow export RUN_ID --format cassette -o FILE` gathers the exchanges a run's agents
received from the traffic log (errorflow/models/exchange_store.py) and writes them,
redacted (`redact_obj` on every request and reply: keys, paths, credentials), with what
the run was. `--backend replay:FILE` answers every model request of a run from the file:
the same scenario, seed and overrides make the same requests, so they find the same keys
(errorflow/models/exchange.py) and the run replays exactly, with no API key and no
server. A request the file does not hold fails its trial as an infrastructure fault
(never an outcome) and says so.

Which exchanges are a run's: those of its scenario (`scenario_sha`, as the store keeps
it) used between its start and its end. Only in-process agents log traffic; agents run
as `errorflow agent` processes log to their own `--db`'s directory.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict, cast

from pydantic import JsonValue

from errorflow.core.errors import ErrorflowError
from errorflow.core.redact import redact_obj
from errorflow.core.regular_file import FileRefused, read_regular
from errorflow.models.exchange import ExchangeRecord
from errorflow.protocol.envelope import JsonObject

FORMAT = "errorflow-cassette"
VERSION = 1

#: The largest cassette read (a device, a FIFO or a larger file is refused unread): far
#: more exchanges than a run with a real model makes, in bounded memory.
MAX_CASSETTE_BYTES = 256 * 1024 * 1024

#: Slack around a run's start and end when its exchanges are picked by time (the run row
#: is written just before the first request and finished just after the last).
WINDOW_SLACK_S = 1.0


class CassetteError(ErrorflowError):
    """A cassette that cannot be read or used, said in one line."""


class RecordedRun(TypedDict):
    """What a cassette says about one run it recorded."""

    run_id: str
    scenario: str
    seed: int
    trials: int
    propagation: str
    label: str | None
    scenario_sha: str


@dataclass(frozen=True)
class RunWindow:
    """A stored run, as far as finding its exchanges goes."""

    run: RecordedRun
    started: float
    finished: float | None

    def holds(self, rec: ExchangeRecord) -> bool:
        if rec.get("scenario_sha") != self.run["scenario_sha"]:
            return False
        t = rec.get("t", 0.0)
        end = self.finished if self.finished is not None else float("inf")
        return self.started - WINDOW_SLACK_S <= t <= end + WINDOW_SLACK_S


def run_exchanges(window: RunWindow, records: Iterable[ExchangeRecord]) -> list[ExchangeRecord]:
    """A run's exchanges, the first reply of each key (a key is used once per run)."""
    seen: dict[str, ExchangeRecord] = {}
    for rec in records:
        if window.holds(rec) and rec["key"] not in seen:
            seen[rec["key"]] = rec
    return list(seen.values())


def cassette_document(windows: list[RunWindow], records: list[ExchangeRecord]) -> JsonObject:
    """The cassette of one or more runs (a group's arms and baselines), redacted."""
    exchanges: list[JsonValue] = []
    for window in windows:
        for rec in run_exchanges(window, records):
            kept = dict(rec)
            kept["request"] = redact_obj(rec["request"])
            kept["reply"] = redact_obj(rec["reply"])
            exchanges.append(cast(JsonValue, kept))
    runs: list[JsonValue] = [cast(JsonValue, dict(w.run)) for w in windows]
    return {"format": FORMAT, "version": VERSION, "runs": runs, "exchanges": exchanges}


@dataclass
class Cassette:
    """A cassette read for replay: replies by key, and the experiments it recorded."""

    path: Path
    replies: dict[str, JsonObject]
    experiments: set[str]
    runs: list[RecordedRun] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> Cassette:
        try:
            doc = json.loads(read_regular(path, MAX_CASSETTE_BYTES))
        except FileRefused as exc:
            raise CassetteError(f"cannot read {path}: {exc}") from None
        except ValueError as exc:  # not UTF-8 either
            raise CassetteError(f"{path} is not JSON ({str(exc)[:200]})") from None
        except RecursionError:
            raise CassetteError(f"{path} is not a cassette: JSON nested too deeply") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise CassetteError(f"{path} is not an errorflow cassette")
        if doc.get("version") != VERSION:
            raise CassetteError(
                f"{path}: cassette version {doc.get('version')!r}, expected {VERSION}"
            )
        replies: dict[str, JsonObject] = {}
        experiments: set[str] = set()
        for rec in doc.get("exchanges") or []:
            if isinstance(rec, dict) and isinstance(rec.get("key"), str):
                replies.setdefault(rec["key"], rec.get("reply") or {})
                experiments.add(str(rec.get("experiment")))
        runs = [cast(RecordedRun, r) for r in doc.get("runs") or [] if isinstance(r, dict)]
        return cls(path, replies, experiments, runs)

    def get(self, key: str) -> JsonObject | None:
        return self.replies.get(key)

    def recorded(self) -> str:
        """What the cassette recorded, for messages: `contamination seed 3 (2 runs)`."""
        if not self.runs:
            return "nothing"
        first = self.runs[0]
        more = f" ({len(self.runs)} runs)" if len(self.runs) > 1 else ""
        return f"{first.get('scenario')} seed {first.get('seed')}{more}"
