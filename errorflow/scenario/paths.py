"""Dotted paths into a scenario's data: `agents.researcher.policy.strategy`, `task.needs.0`.

`set_path` is how an override (`--set`, `--vary`, a `sweep:` value) writes into the
plain data of a scenario, before that data is validated again as a whole. It lives
apart from errorflow.scenario.overrides so the loader can use it (for the `sweep:`
block) while the overrides use the loader.
"""

from __future__ import annotations

from typing import Any

from errorflow.core.errors import InputError
from errorflow.scenario.checks.wording import short


class OverrideError(InputError, ValueError):
    """A path that cannot be set; `path` is the override's path as written."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


def set_path(data: dict[str, object], path: str, value: object) -> None:
    parts = path.split(".")
    node: Any = data
    for i, part in enumerate(parts[:-1]):
        nxt = _child(node, part, path)
        if nxt is None:
            nxt = {}
            if isinstance(node, dict):
                node[part] = nxt
            else:
                raise OverrideError(f"{path}: {'.'.join(parts[: i + 1])} does not exist", path)
        node = nxt
    last = parts[-1]
    if isinstance(node, list):
        index = _index(last, node, path)
        node[index] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise OverrideError(f"{path}: cannot set a field inside {type(node).__name__}", path)


def _child(node: Any, part: str, path: str) -> Any:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list):
        return node[_index(part, node, path)]
    raise OverrideError(
        f"{path}: {short(part)} is inside a {type(node).__name__}, not a mapping", path
    )


def _index(part: str, node: list[Any], path: str) -> int:
    """A list index as a path writes it: ASCII digits, counted from 0 (int() would also
    take `-1`, counting from the end, ` 1`, `1_0` and other scripts' digits)."""
    if not (part.isascii() and part.isdigit()):
        raise OverrideError(f"{path}: {short(part)} is not a list index (0, 1, ...)", path)
    if len(part) > len(str(len(node))) or int(part) >= len(node):
        index = part if len(part) <= 20 else short(part)
        raise OverrideError(f"{path}: index {index} out of range (list of {len(node)})", path)
    return int(part)
