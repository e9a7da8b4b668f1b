"""YAML with marks: the plain data of a scenario file and where every node came from.

PyYAML gives us marks (line, column) for every node; `parse_yaml` keeps them next to
the plain data, keyed by the path of the node (`("agents", "writer", "sends_to", 0)`),
so any error path can be pointed back at the line that caused it. Duplicate keys,
which PyYAML silently overwrites, are errors; so are alias bombs and absurd nesting.
"""

from __future__ import annotations

from typing import Any

import yaml

from errorflow.scenario.problems import (
    LIMITS_HINT,
    Loc,
    NodePath,
    Problem,
    ScenarioError,
    dotted,
    file_error,
)
from errorflow.scenario.wording import found

#: YAML nodes after alias expansion (an "alias bomb" stops here, documented limit).
MAX_YAML_NODES = 200_000


class _Loader(yaml.SafeLoader):
    """SafeLoader that records where every mapping key and value came from."""

    node_marks: dict[NodePath, Loc]
    node_count: int
    open_nodes: set[int]


class _BadNode(Exception):
    def __init__(self, path: NodePath, node: yaml.Node, message: str) -> None:
        self.path, self.node, self.message = path, node, message


def _loc(mark: yaml.Mark) -> Loc:
    return (mark.line + 1, mark.column + 1)


def _construct(loader: _Loader, node: yaml.Node, path: NodePath) -> Any:
    loader.node_count += 1
    if loader.node_count > MAX_YAML_NODES:
        raise _BadNode(
            path,
            node,
            f"expected at most {MAX_YAML_NODES} YAML nodes after expanding aliases, found "
            f"more ({LIMITS_HINT})",
        )
    loader.node_marks[path] = _loc(node.start_mark)
    if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        if id(node) in loader.open_nodes:
            raise _BadNode(path, node, "recursive alias (a node that contains itself)")
        loader.open_nodes.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return _construct_mapping(loader, node, path)
            return [_construct(loader, child, (*path, i)) for i, child in enumerate(node.value)]
        finally:
            loader.open_nodes.discard(id(node))
    return loader.construct_object(node, deep=True)


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, path: NodePath) -> dict[Any, Any]:
    own = sum(1 for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge")
    loader.flatten_mapping(node)  # `<<: *defaults` merge keys: their pairs come first
    n_merged = len(node.value) - own
    out: dict[Any, Any] = {}
    first: dict[Any, yaml.Node] = {}
    merged_keys: set[Any] = set()
    for index, (key_node, value_node) in enumerate(node.value):
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str | int | float | bool) or key is None:
            raise _BadNode(path, key_node, f"expected a plain key (a name), found {found(key)}")
        if index < n_merged or key in merged_keys:
            merged_keys.discard(key)  # merged pairs may be overridden, later wins
            if index < n_merged:
                merged_keys.add(key)
        elif key in out:
            line = first[key].start_mark.line + 1
            raise _BadNode(
                (*path, str(key)),
                key_node,
                f"duplicate key {key!r} (first defined at line {line}); names must be unique",
            )
        first[key] = key_node
        out[key] = _construct(loader, value_node, (*path, str(key)))
        loader.node_marks[(*path, str(key))] = _loc(key_node.start_mark)
    return out


def parse_yaml(text: str, file: str) -> tuple[Any, dict[NodePath, Loc]]:
    """The plain data of `text` and the (line, column) of every node, by path."""
    loader = _Loader(text)
    loader.node_marks = {}
    loader.node_count = 0
    loader.open_nodes = set()
    try:
        root = loader.get_single_node()
        if root is None:
            raise file_error(file, "the file is empty; expected a scenario mapping")
        data = _construct(loader, root, ())
    except _BadNode as exc:
        at = _loc(exc.node.start_mark)
        raise ScenarioError(file, [Problem(dotted(exc.path), *at, exc.message)]) from None
    except yaml.MarkedYAMLError as exc:
        raise _invalid_yaml(file, exc) from None
    except yaml.YAMLError as exc:
        raise file_error(file, f"not valid YAML: {exc}") from None
    except RecursionError:
        raise file_error(file, "not valid YAML for a scenario: nested too deeply") from None
    finally:
        loader.dispose()
    return data, loader.node_marks


def _invalid_yaml(file: str, exc: yaml.MarkedYAMLError) -> ScenarioError:
    """PyYAML's own error, pointed at its line, with a hint for the usual causes."""
    mark = exc.problem_mark or exc.context_mark
    line, column = _loc(mark) if mark else (None, None)
    what = " ".join(str(p) for p in (exc.context, exc.problem) if p) or str(exc)
    if "'\\t'" in what:
        what += " (indent with spaces, not tabs)"
    elif "block" in what or "mapping values are not allowed" in what:
        what += " (check the indentation of this line and the one before)"
    return file_error(file, f"not valid YAML: {what}", line, column)
