"""Ids as a user types them: a whole run or group id, or a unique prefix."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, NamedTuple

from errorflow.core.errors import InputError
from errorflow.store.opening import connect_ro

# -- ids: what a user types (a whole id or a unique prefix) -----------------------------


class IdLookupError(InputError, LookupError):
    """An id the store cannot resolve to exactly one run or group."""

    def __init__(self, ident: str, candidates: list[str]) -> None:
        self.ident, self.candidates = ident, candidates
        super().__init__(ident)


class UnknownId(IdLookupError):
    """No run or group has this id or an id starting with it."""


class AmbiguousId(IdLookupError):
    """Several ids start with this prefix (`candidates`, newest first)."""


class StoredId(NamedTuple):
    kind: Literal["run", "group"]
    id: str


def resolve_id(path: Path, ident: str, *, groups: bool = True) -> StoredId:
    """The run (or, with `groups`, the group) `ident` names: a whole id, or a prefix of
    exactly one. A prefix of one group and of runs of that group only names the group."""
    with connect_ro(path) as conn:
        runs = conn.execute(
            "SELECT run_id, group_id FROM runs WHERE substr(run_id, 1, length(?)) = ?"
            " ORDER BY started DESC",
            (ident, ident),
        ).fetchall()
        group_ids = conn.execute(
            "SELECT group_id FROM runs WHERE substr(group_id, 1, length(?)) = ?"
            " GROUP BY group_id ORDER BY MAX(started) DESC",
            (ident, ident),
        ).fetchall()
    found = [StoredId("run", str(r["run_id"])) for r in runs]
    if groups:
        found = [StoredId("group", str(g[0])) for g in group_ids] + found
    exact = [f for f in found if f.id == ident]
    if exact:
        return exact[0]
    if groups and len(group_ids) == 1 and all(r["group_id"] == group_ids[0][0] for r in runs):
        return found[0]
    if len(found) == 1:
        return found[0]
    ids = [f.id for f in found]
    raise AmbiguousId(ident, ids) if found else UnknownId(ident, ids)


def run_exists(path: Path, run_id: str) -> bool:
    if not path.exists():
        return False
    with connect_ro(path) as conn:
        return conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is not None
