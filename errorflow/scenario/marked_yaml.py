"""YAML with marks: the plain data of a scenario file and where every node came from.

PyYAML gives us marks (line, column) for every node; `parse_yaml` keeps them next to
the plain data, keyed by the path of the node (`("agents", "writer", "sends_to", 0)`),
so any error path can be pointed back at the line that caused it. Duplicate keys,
which PyYAML silently overwrites, are errors; so are alias bombs and absurd nesting.
Characters YAML does not allow (controls such as BEL, U+0080, U+FFFE) are reported at
their line and column before PyYAML sees them (it would raise from its constructor), and
a construct left open (a `[`, a quote, a key without its `:`) is reported where it was
opened, not at the line where PyYAML noticed.
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
    _check_printable(text, file)
    try:
        loader = _Loader(text)
    except yaml.YAMLError as exc:  # the reader's own checks, should ours miss one
        raise file_error(file, f"not valid YAML: {exc}") from None
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


#: PyYAML contexts of a construct opened on one line and left unfinished: PyYAML says
#: so where it gives up (the next token, often a line below); the opening is the mistake.
_OPENED = ("while parsing a flow", "while scanning a quoted scalar", "while scanning a simple key")


def _invalid_yaml(file: str, exc: yaml.MarkedYAMLError) -> ScenarioError:
    """PyYAML's own error, pointed at its line, with a hint for the usual causes."""
    mark = exc.problem_mark or exc.context_mark
    what = " ".join(str(p) for p in (exc.context, exc.problem) if p) or str(exc)
    opened = exc.context_mark
    if (
        mark is not None
        and opened is not None
        and str(exc.context or "").startswith(_OPENED)
        and opened.line < mark.line
    ):
        line, column = _loc(mark)
        what += f" (noticed at line {line}, column {column})"
        mark = opened
    if "'\\t'" in what:
        what += " (indent with spaces, not tabs)"
    elif "block" in what or "mapping values are not allowed" in what:
        what += " (check the indentation of this line and the one before)"
    at: tuple[int | None, int | None] = _loc(mark) if mark else (None, None)
    return file_error(file, f"not valid YAML: {what}", *at)


def _check_printable(text: str, file: str) -> None:
    """Refuse a character YAML does not allow, at its line and column."""
    bad = yaml.reader.Reader.NON_PRINTABLE.search(text)
    if bad is None:
        return
    pos, char = bad.start(), bad.group()
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    code = ord(char)
    kind = "control character" if code < 0xA0 else "character"
    escape = f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
    msg = (
        f"expected printable text, found the {kind} U+{code:04X}, which YAML does not "
        f'allow; write it as the escape "{escape}" inside a double-quoted string'
    )
    raise file_error(file, msg, line, column)
