"""YAML with marks: the plain data of a scenario file and where every node came from.

PyYAML gives us marks (line, column) for every node; `parse_yaml` keeps them next to
the plain data, keyed by the path of the node (`("agents", "writer", "sends_to", 0)`),
so any error path can be pointed back at the line that caused it. Duplicate keys,
which PyYAML silently overwrites, are errors; so are alias bombs and long documents
(`MAX_YAML_NODES`, counted as nodes are read and as aliases are expanded), nesting
deeper than `MAX_YAML_DEPTH` (refused as it is read, before anything recurses),
integers of more than `MAX_INT_DIGITS` digits (Python cannot print them), text that is
not Unicode (a `\\udcff` escape) and values their tag cannot hold (`2024-13-45`).
`read_value` reads a value given on the command line (`--set`, `--vary`) within the same
limits, and the values of one command line within `MAX_VALUE_NODES` together.
Characters YAML does not allow (controls such as BEL, U+0080, U+FFFE) are reported at
their line and column before PyYAML sees them (it would raise from its constructor), and
a construct left open (a `[`, a quote, a key without its `:`) is reported where it was
opened, not at the line where PyYAML noticed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from errorflow.core.errors import ErrorflowError
from errorflow.protocol.envelope import MAX_PAYLOAD_VALUES
from errorflow.scenario.checks.wording import found, short
from errorflow.scenario.problems import (
    LIMITS_HINT,
    Loc,
    NodePath,
    Problem,
    ScenarioError,
    dotted,
    file_error,
)
from errorflow.scenario.scenario_file import MAX_SCENARIO_BYTES

#: YAML nodes after alias expansion (an "alias bomb" stops here, documented limit),
#: counted as they are read too: a scenario's roll call carries at most 20,000 values
#: (errorflow.protocol.envelope MAX_PAYLOAD_VALUES), so a file of more can never be valid,
#: and PyYAML reads about 40,000 nodes a second.
MAX_YAML_NODES = 50_000
#: YAML nodes the values of one command line (`--set`, `--vary`) may hold together: no
#: scenario holds more than one roll call carries.
MAX_VALUE_NODES = MAX_PAYLOAD_VALUES
#: Collections inside collections (the bundled scenarios nest ten deep): checked while
#: the YAML is read, before anything recurses that far.
MAX_YAML_DEPTH = 64
#: Digits of an integer (a seed fits in 20): Python refuses to print one of more than
#: 4,300, so a longer one would fail wherever it is shown.
MAX_INT_DIGITS = 100
_INT_LIMIT = 10**MAX_INT_DIGITS
_INT_TAG = "tag:yaml.org,2002:int"


class _Loader(yaml.SafeLoader):
    """SafeLoader that records where every mapping key and value came from, and refuses
    nesting deeper than `MAX_YAML_DEPTH` as it composes (PyYAML recurses per level)."""

    node_marks: dict[NodePath, Loc]
    node_count: int  # built, aliases expanded
    open_nodes: set[int]
    depth = 0
    composed = 0  # read, an alias once
    node_limit = MAX_YAML_NODES
    too_many = ""  # what exceeding `node_limit` is said as

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self.depth += 1
        self.composed += 1
        try:
            if self.depth > MAX_YAML_DEPTH or self.composed > self.node_limit:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise _OverLimit(mark, self.depth > MAX_YAML_DEPTH)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


class _OverLimit(ErrorflowError):
    """Nesting or nodes over the limit, noticed while reading (before any recursion)."""

    def __init__(self, mark: yaml.Mark, deep: bool) -> None:
        self.mark, self.deep = mark, deep


class _BadNode(ErrorflowError):
    def __init__(self, path: NodePath, node: yaml.Node, message: str) -> None:
        self.path, self.node, self.message = path, node, message


def _loc(mark: yaml.Mark) -> Loc:
    return (mark.line + 1, mark.column + 1)


def _construct(loader: _Loader, node: yaml.Node, path: NodePath) -> Any:
    loader.node_count += 1
    if loader.node_count > loader.node_limit:
        raise _BadNode(path, node, loader.too_many)
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
    return _scalar(loader, node, path)


def _scalar(loader: _Loader, node: yaml.Node, path: NodePath) -> Any:
    """A scalar's value, refused when no scenario could use it and showing it would fail:
    an integer of too many digits, text that is not Unicode (a lone surrogate from a
    `\\udcff` escape), a value its tag cannot hold (`2024-13-45`, `!!int x`)."""
    if node.tag == _INT_TAG and sum(c.isdigit() for c in node.value) > MAX_INT_DIGITS:
        raise _BadNode(path, node, _too_many_digits(node.value))
    try:
        value = loader.construct_object(node, deep=True)
    except (ValueError, TypeError, AttributeError, ArithmeticError) as exc:
        why = f": {exc}" if isinstance(exc, ValueError) else ""
        msg = f"cannot read {short(node.value)} as {_tag_name(node)}{why}"
        raise _BadNode(path, node, msg) from None
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= _INT_LIMIT:
        raise _BadNode(path, node, _too_many_digits(node.value))
    if isinstance(value, str):
        _check_unicode(value, path, node)
    return value


def _too_many_digits(text: str) -> str:
    return (
        f"expected an integer of at most {MAX_INT_DIGITS} digits, found {short(text)} "
        f"({len(text):,} characters; {LIMITS_HINT})"
    )


def _tag_name(node: yaml.Node) -> str:
    """`a timestamp`, `an int`: the YAML type a tag names."""
    name = str(node.tag).rsplit(":", 1)[-1]
    return f"an {name}" if name[:1] in "aeiou" else f"a {name}"


def _check_unicode(text: str, path: NodePath, node: yaml.Node) -> None:
    """Refuse a lone surrogate: it cannot be written as UTF-8 (the store, the bus)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        raise _BadNode(
            path,
            node,
            f"expected Unicode text, found U+{code:04X}, half of a surrogate pair, which "
            "is no character (a byte that was not UTF-8?)",
        ) from None


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, path: NodePath) -> dict[Any, Any]:
    own = sum(1 for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge")
    loader.flatten_mapping(node)  # `<<: *defaults` merge keys: their pairs come first
    n_merged = len(node.value) - own
    out: dict[Any, Any] = {}
    first: dict[Any, yaml.Node] = {}
    merged_keys: set[Any] = set()
    for index, (key_node, value_node) in enumerate(node.value):
        if not isinstance(key_node, yaml.ScalarNode):  # never built: it may be a bomb
            kind = "a mapping" if isinstance(key_node, yaml.MappingNode) else "a list"
            raise _BadNode(path, key_node, f"expected a plain key (a name), found {kind}")
        key = _scalar(loader, key_node, path)
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
    read = _parse(text, file, MAX_YAML_NODES, _too_many(MAX_YAML_NODES, "after expanding aliases"))
    if read.data is _EMPTY:
        raise file_error(file, "the file is empty; expected a scenario mapping")
    return read.data, read.marks


class NotYAML(ScenarioError):
    """Text that does not parse as YAML at all (not YAML over a limit)."""


@dataclass
class ValueBudget:
    """The YAML nodes the values of one command line may still hold together."""

    left: int = MAX_VALUE_NODES


def read_value(text: str, source: str, budget: ValueBudget | None = None) -> Any:
    """One value given on the command line (`--set PATH=VALUE`, `--vary`), as YAML reads
    it, within the limits of a scenario file: its size, nesting, alias expansion,
    integer digits and Unicode, and the nodes of all the values of the command line
    together (`budget`, spent as values are read). Text with no value (empty, a comment)
    is null; text that is not YAML (a `[` left open, a control character) raises
    `NotYAML`: the caller may take it as a string. A value over a limit is a
    ScenarioError naming `source`."""
    budget = budget or ValueBudget()
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_SCENARIO_BYTES:
        msg = f"expected at most {MAX_SCENARIO_BYTES:,} bytes, found {size:,} ({LIMITS_HINT})"
        raise file_error(source, msg)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a byte that was not UTF-8, decoded as a surrogate
        code = ord(text[exc.start])
        msg = f"expected Unicode text, found U+{code:04X} at character {exc.start + 1}"
        raise file_error(source, msg) from None
    too_many = _too_many(MAX_VALUE_NODES, "in the values of a command line together")
    read = _parse(text, source, budget.left, too_many)
    budget.left -= read.nodes
    return None if read.data is _EMPTY else read.data


def _too_many(limit: int, where: str) -> str:
    return f"expected at most {limit} YAML nodes {where}, found more ({LIMITS_HINT})"


#: What `_parse` returns for a document with no node (empty, or only comments).
_EMPTY = object()


@dataclass(frozen=True)
class _Read:
    data: Any
    marks: dict[NodePath, Loc]
    nodes: int  # read or built, whichever is more


def _parse(text: str, file: str, node_limit: int, too_many: str) -> _Read:
    _check_printable(text, file)
    try:
        loader = _Loader(text)
    except yaml.YAMLError as exc:  # the reader's own checks, should ours miss one
        raise _not_yaml(file, f"not valid YAML: {exc}") from None
    loader.node_marks, loader.node_count, loader.open_nodes = {}, 0, set()
    loader.node_limit, loader.too_many = node_limit, too_many
    try:
        root = loader.get_single_node()
        data = _EMPTY if root is None else _construct(loader, root, ())
    except _BadNode as exc:
        at = _loc(exc.node.start_mark)
        raise ScenarioError(file, [Problem(dotted(exc.path), *at, exc.message)]) from None
    except _OverLimit as exc:
        depth = f"expected at most {MAX_YAML_DEPTH} levels of nesting, found more ({LIMITS_HINT})"
        raise file_error(file, depth if exc.deep else too_many, *_loc(exc.mark)) from None
    except yaml.MarkedYAMLError as exc:
        raise _invalid_yaml(file, exc) from None
    except yaml.YAMLError as exc:
        raise _not_yaml(file, f"not valid YAML: {exc}") from None
    except RecursionError:  # should the depth limit miss a way down
        raise file_error(file, "not valid YAML for a scenario: nested too deeply") from None
    finally:
        loader.dispose()
    return _Read(data, loader.node_marks, max(loader.node_count, loader.composed))


def _not_yaml(file: str, message: str, line: int | None = None, col: int | None = None) -> NotYAML:
    return NotYAML(file, [Problem("", line, col, message)])


#: PyYAML contexts of a construct opened on one line and left unfinished: PyYAML says
#: so where it gives up (the next token, often a line below); the opening is the mistake.
_OPENED = ("while parsing a flow", "while scanning a quoted scalar", "while scanning a simple key")


def _invalid_yaml(file: str, exc: yaml.MarkedYAMLError) -> NotYAML:
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
    return _not_yaml(file, f"not valid YAML: {what}", *at)


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
    raise _not_yaml(file, msg, line, column)
