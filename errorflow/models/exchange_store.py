"""Where model exchanges are kept: a directory of JSON-lines files.

Two uses of one format:

- the **response cache** (`--cache DIR`): read whole when a run starts; a request whose
  key is there is answered from it, with no request to the server; a reply the server
  gives is added;
- the **traffic log** (`<db>.traffic/`, next to the store): every reply a run's agents
  received (from the server, the cache or a cassette), which `errorflow export RUN_ID
  --format cassette` turns into a recorded session.

Each process appends to a file of its own (`<pid>-<random>.jsonl`, created owner-only:
prompts and replies are the user's data), so agent processes may share a directory. A
line that cannot be read (a write cut short) is skipped.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from errorflow.models.exchange import ExchangeRecord, canonical
from errorflow.protocol.envelope import JsonObject

SUFFIX = ".jsonl"


def traffic_dir_for(db: Path) -> Path:
    """The traffic log next to a store: `errorflow.db` → `errorflow.db.traffic/`."""
    return db.with_name(db.name + ".traffic")


def read_records(directory: Path) -> Iterator[ExchangeRecord]:
    """Every readable exchange in a directory, file by file in name order."""
    if not directory.is_dir():
        return
    for path in sorted(directory.glob(f"*{SUFFIX}")):
        with path.open(encoding="utf-8") as f:
            for line in f:
                try:
                    data = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a crash
                if isinstance(data, dict) and isinstance(data.get("key"), str):
                    yield cast(ExchangeRecord, data)


class ExchangeLog:
    """Appends exchanges to this process's own file in `directory`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._path: Path | None = None

    def append(self, rec: ExchangeRecord) -> None:
        if self._path is None:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._path = self.directory / f"{os.getpid()}-{uuid.uuid4().hex[:8]}{SUFFIX}"
        # Opened for each line: nothing stays open, and each line is whole when it lands.
        fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(canonical(rec) + "\n")


class ResponseCache:
    """Replies by exchange key: what `directory` held when first asked, plus what this
    process adds."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._log = ExchangeLog(directory)
        self._replies: dict[str, JsonObject] | None = None

    def _loaded(self) -> dict[str, JsonObject]:
        if self._replies is None:
            self._replies = {r["key"]: r["reply"] for r in read_records(self.directory)}
        return self._replies

    def get(self, key: str) -> JsonObject | None:
        return self._loaded().get(key)

    def put(self, rec: ExchangeRecord) -> None:
        replies = self._loaded()
        if rec["key"] not in replies:
            replies[rec["key"]] = rec["reply"]
            self._log.append(rec)

    def __len__(self) -> int:
        return len(self._loaded())
