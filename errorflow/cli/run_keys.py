"""Where a command gets the run key that signs a run's envelopes: `--key-file PATH` or
`ERRORFLOW_RUN_KEY` (errorflow/protocol/signing.py says why it never travels on the bus).

`run --external-agents` needs one the agents can be given: it reads `--key-file`, or
creates the file (owner-only) with a new key; `agent` must be given the run's key; a
run of agents in this process makes a fresh key when given none.
"""

from __future__ import annotations

from pathlib import Path

from errorflow.cli.console import say
from errorflow.cli.errors import UsageError
from errorflow.protocol.signing import (
    KEY_ENV,
    RunKeyError,
    key_from_env,
    new_key,
    read_key_file,
)
from errorflow.protocol.signing import write_key_file as write_key


def _from_file(path: Path, *, create: bool) -> tuple[bytes, bool]:
    """The key in `path` (and False), or with `create` a new key written there (and True)."""
    try:
        if create and not path.exists():
            key = new_key()
            write_key(path, key)
            return key, True
        return read_key_file(path), False
    except RunKeyError as exc:
        raise UsageError(str(exc), where=f"--key-file {path}") from None
    except OSError as exc:
        where = f"--key-file {path}"
        raise UsageError(f"cannot write the key file: {exc.strerror}", where) from None


def _from_env() -> bytes | None:
    try:
        return key_from_env()
    except RunKeyError as exc:
        raise UsageError(str(exc), where=KEY_ENV) from None


def runner_key(key_file: str | None, external_agents: bool) -> bytes | None:
    """The key `run` signs with (None: the runner makes a fresh one)."""
    if key_file:
        path = Path(key_file)
        key, created = _from_file(path, create=True)
        if external_agents:
            say(f"run key in {path} (give it to each agent: --key-file {path} or {KEY_ENV})")
        elif created:
            say(f"run key written to {path}")
        return key
    from_env = _from_env()
    if from_env is None and external_agents:
        raise UsageError(
            f"the agents need the run key: expected --key-file PATH (created if missing) "
            f"or {KEY_ENV}",
            where="--external-agents",
        )
    return from_env


def agent_key(key_file: str | None) -> bytes:
    """The key of the run an agent joins: it must be the runner's."""
    if key_file:
        return _from_file(Path(key_file), create=False)[0]
    key = _from_env()
    if key is None:
        raise UsageError(
            f"the run key is needed to join a run: expected --key-file PATH (the runner's) "
            f"or {KEY_ENV}",
            where="agent",
        )
    return key


def observer_key(key_file: str | None) -> bytes | None:
    """The key an observer (`tui --attach`) verifies with; None: it shows unverified."""
    if key_file:
        return _from_file(Path(key_file), create=False)[0]
    return _from_env()
