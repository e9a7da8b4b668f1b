"""The API keys of a run's real model backends: read from the environment only (never
from a scenario file), handed to the SDK clients and nowhere else.

`check_backends` (errorflow/models/backends.py) reads them before a run starts and the
run passes them on to the agents' backend factories as one `ApiKeys`, which never shows
a key (its ``repr`` names the backends only).
"""

from __future__ import annotations

from collections.abc import Mapping

#: Where each real backend's key is read, and a value that serves a local server that
#: checks none.
KEY_ENVS: Mapping[str, str] = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
_LOCAL_HINTS: Mapping[str, str] = {
    "anthropic": "for Ollama any value works, e.g. ANTHROPIC_API_KEY=ollama",
    "openai": "for a local server any value works, e.g. OPENAI_API_KEY=local",
}


def local_hint(backend: str) -> str:
    return _LOCAL_HINTS[backend]


class ApiKeys:
    """Keys by backend name (`anthropic`, `openai`)."""

    __slots__ = ("_keys",)

    def __init__(self, keys: Mapping[str, str]) -> None:
        self._keys = dict(keys)

    def get(self, backend: str) -> str | None:
        return self._keys.get(backend)

    def __repr__(self) -> str:
        return f"ApiKeys({', '.join(sorted(self._keys))})"

    __str__ = __repr__


def key_for(given: str | ApiKeys | None, backend: str) -> str | None:
    """The key `backend` uses: from `ApiKeys`, or `given` itself when a caller with a
    single key passes it as a string."""
    if isinstance(given, ApiKeys):
        return given.get(backend)
    return given
