"""Read a scenario file and turn every problem into a ScenarioError a person can act on.

PyYAML gives us marks (line, column) for every node; we keep them next to the plain
data so a pydantic error path (`agents.writer.sends_to.0`) can be pointed back at the
line that caused it. Duplicate keys, which PyYAML silently overwrites, are errors.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from errorflow.scenario import Scenario

#: Files larger than this are refused before parsing (documented limit).
MAX_SCENARIO_BYTES = 1_000_000

Loc = tuple[int, int]  # 1-based line, column


@dataclass
class Problem:
    path: str
    line: int | None
    column: int | None
    message: str

    def render(self, file: str) -> str:
        where = file if self.line is None else f"{file}:{self.line}:{self.column}"
        field = f" {self.path}:" if self.path else ""
        return f"{where}:{field} {self.message}"


class ScenarioError(Exception):
    """A scenario file that cannot be used; `str()` lists every problem, one a line."""

    def __init__(self, file: str, problems: list[Problem]) -> None:
        self.file = file
        self.problems = problems
        super().__init__("\n".join(p.render(file) for p in problems))


class _Loader(yaml.SafeLoader):
    """SafeLoader that records where every mapping key and value came from."""

    node_marks: dict[tuple[str | int, ...], Loc]


def _construct(loader: _Loader, node: yaml.Node, path: tuple[str | int, ...]) -> Any:
    loader.node_marks[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool) or key is None:
                raise _DuplicateOrBadKey(path, key_node, f"mapping key {key!r} is not a scalar")
            if key in out:
                raise _DuplicateOrBadKey((*path, str(key)), key_node, f"duplicate key {key!r}")
            out[key] = _construct(loader, value_node, (*path, str(key)))
            loader.node_marks[(*path, str(key))] = (
                key_node.start_mark.line + 1,
                key_node.start_mark.column + 1,
            )
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(loader, child, (*path, i)) for i, child in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


class _DuplicateOrBadKey(Exception):
    def __init__(self, path: tuple[str | int, ...], node: yaml.Node, message: str) -> None:
        self.path, self.node, self.message = path, node, message


def parse_yaml(text: str, file: str) -> tuple[Any, dict[tuple[str | int, ...], Loc]]:
    loader = _Loader(text)
    loader.node_marks = {}
    try:
        root = loader.get_single_node()
        if root is None:
            raise ScenarioError(file, [Problem("", None, None, "the file is empty")])
        data = _construct(loader, root, ())
    except _DuplicateOrBadKey as exc:
        mark = exc.node.start_mark
        raise ScenarioError(
            file, [Problem(_dotted(exc.path), mark.line + 1, mark.column + 1, exc.message)]
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark else None
        col = mark.column + 1 if mark else None
        msg = f"not valid YAML: {exc.problem or exc}"
        raise ScenarioError(file, [Problem("", line, col, msg)]) from None
    except yaml.YAMLError as exc:
        raise ScenarioError(file, [Problem("", None, None, f"not valid YAML: {exc}")]) from None
    finally:
        loader.dispose()
    return data, loader.node_marks


def _dotted(path: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in path)


def _nearest_mark(
    marks: dict[tuple[str | int, ...], Loc], path: tuple[str | int, ...]
) -> Loc | None:
    for cut in range(len(path), -1, -1):
        if path[:cut] in marks:
            return marks[path[:cut]]
    return None


def _problems_from(exc: ValidationError, marks: dict[tuple[str | int, ...], Loc]) -> list[Problem]:
    problems = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        line_col = _nearest_mark(marks, loc)
        msg = err["msg"]
        if err["type"] == "extra_forbidden" and loc:
            parent = _model_for_path(loc[:-1])
            known = list(parent.model_fields) if parent else []
            close = difflib.get_close_matches(str(loc[-1]), known, n=1)
            msg = f"unknown key {loc[-1]!r}"
            msg += f"; did you mean {close[0]!r}?" if close else f"; valid keys: {', '.join(known)}"
        elif err["type"] == "missing":
            msg = "required field is missing"
        elif "input" in err and err["type"] not in ("value_error",):
            msg = f"{msg}; found {err['input']!r}"[:300]
        line, col = line_col if line_col else (None, None)
        problems.append(Problem(_dotted(loc), line, col, msg))
    return problems


def _model_for_path(path: tuple[str | int, ...]) -> type[BaseModel] | None:
    """Walk Scenario's fields along `path`, skipping dict keys and list indexes."""
    from typing import get_args, get_origin

    model: Any = Scenario
    i = 0
    while i < len(path):
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = model.model_fields.get(str(path[i]))
        if field is None:
            return None
        ann: Any = field.annotation
        i += 1
        # unwrap containers: each dict/list consumes one path element
        while True:
            origin = get_origin(ann)
            args = [a for a in get_args(ann) if a is not type(None)]
            if origin in (dict, list):
                ann = args[-1]
                i += 1
                continue
            if origin is not None and args:  # Optional / Union / Annotated
                models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
                ann = models[0] if models else args[0]
                if get_origin(ann) is None and not models:
                    break
                continue
            break
        model = ann
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def load(path: Path) -> Scenario:
    file = str(path)
    if not path.exists():
        raise ScenarioError(file, [Problem("", None, None, "no such file")])
    if path.is_dir():
        raise ScenarioError(file, [Problem("", None, None, "is a directory, not a scenario file")])
    raw = path.read_bytes()
    if len(raw) > MAX_SCENARIO_BYTES:
        msg = f"file is {len(raw)} bytes; the limit is {MAX_SCENARIO_BYTES}"
        raise ScenarioError(file, [Problem("", None, None, msg)])
    if b"\x00" in raw:
        raise ScenarioError(file, [Problem("", None, None, "binary file (NUL bytes), not YAML")])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = f"not UTF-8 text (byte {exc.start})"
        raise ScenarioError(file, [Problem("", None, None, msg)]) from None
    data, marks = parse_yaml(text, file)
    if not isinstance(data, dict):
        found = type(data).__name__
        raise ScenarioError(
            file, [Problem("", 1, 1, f"expected a mapping at top level, found {found}")]
        )
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(file, _problems_from(exc, marks)) from None


def load_text(text: str, file: str = "<string>") -> Scenario:
    data, marks = parse_yaml(text, file)
    if not isinstance(data, dict):
        raise ScenarioError(file, [Problem("", 1, 1, "expected a mapping at top level")])
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(file, _problems_from(exc, marks)) from None
