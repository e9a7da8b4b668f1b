"""Read a scenario file and turn every problem into a ScenarioError a person can act on.

Theory of operation
-------------------
PyYAML gives us marks (line, column) for every node; `parse_yaml` keeps them next to
the plain data, keyed by the path of the node (`("agents", "writer", "sends_to", 0)`),
so any error path can be pointed back at the line that caused it. Duplicate keys,
which PyYAML silently overwrites, are errors; so are alias bombs and absurd nesting.

Validation happens in two passes, and every problem of a pass is reported at once:

1. the pydantic `Scenario` model: shapes, types, bounds, unknown keys, and the
   cross-references of `Scenario._references` (which reports each one at its own path);
2. `_semantic_problems`, for what the model leaves as free data or cannot know: the
   policy block (`build_policy(strategy, overrides)`), the simulated model's profile
   and params (`behaviour(profile, params)`), need arguments against the tool's
   argument schema, and the size limits documented in scenarios/FORMAT.md ("Limits").

Every `Problem` renders as one line, `FILE:LINE:COL: PATH: MESSAGE`, and messages say
what was expected and what was found, with the closest valid name for a typo.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from errorflow.scenario.model import (
    MAX_DOCUMENT_BYTES,
    MAX_FINDINGS_BYTES,
    MAX_STEPS,
    MAX_TOOLS,
    Scenario,
)

#: Files larger than this are refused before parsing (documented limit).
MAX_SCENARIO_BYTES = 1_000_000
#: YAML nodes after alias expansion (an "alias bomb" stops here, documented limit).
MAX_YAML_NODES = 200_000

Loc = tuple[int, int]  # 1-based line, column
Path_ = tuple[str | int, ...]

_LIMITS_HINT = "see Limits in scenarios/FORMAT.md"
#: Fields whose upper bound is a documented limit (the rest are ranges of meaning).
_LIMITED = frozenset({"trials", "max_in_flight", "first_n", "max_tokens", "max_steps"})


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


# -- YAML with marks ------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """SafeLoader that records where every mapping key and value came from."""

    node_marks: dict[Path_, Loc]
    node_count: int
    open_nodes: set[int]


class _BadNode(Exception):
    def __init__(self, path: Path_, node: yaml.Node, message: str) -> None:
        self.path, self.node, self.message = path, node, message


def _loc(mark: Any) -> Loc:
    return (mark.line + 1, mark.column + 1)


def _construct(loader: _Loader, node: yaml.Node, path: Path_) -> Any:
    loader.node_count += 1
    if loader.node_count > MAX_YAML_NODES:
        raise _BadNode(
            path,
            node,
            f"expected at most {MAX_YAML_NODES} YAML nodes after expanding aliases, found "
            f"more ({_LIMITS_HINT})",
        )
    loader.node_marks[path] = _loc(node.start_mark)
    if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        if id(node) in loader.open_nodes:
            raise _BadNode(path, node, "recursive alias (a node that contains itself)")
        loader.open_nodes.add(id(node))
        try:
            return _construct_collection(loader, node, path)
        finally:
            loader.open_nodes.discard(id(node))
    return loader.construct_object(node, deep=True)


def _construct_collection(loader: _Loader, node: yaml.Node, path: Path_) -> Any:
    if isinstance(node, yaml.MappingNode):
        own = sum(1 for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge")
        loader.flatten_mapping(node)  # `<<: *defaults` merge keys: their pairs come first
        n_merged = len(node.value) - own
        out: dict[Any, Any] = {}
        first: dict[Any, yaml.Node] = {}
        merged_keys: set[Any] = set()
        for index, (key_node, value_node) in enumerate(node.value):
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool) or key is None:
                raise _BadNode(
                    path, key_node, f"expected a plain key (a name), found {_found(key)}"
                )
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
    return [_construct(loader, child, (*path, i)) for i, child in enumerate(node.value)]


def parse_yaml(text: str, file: str) -> tuple[Any, dict[Path_, Loc]]:
    """The plain data of `text` and the (line, column) of every node, by path."""
    loader = _Loader(text)
    loader.node_marks = {}
    loader.node_count = 0
    loader.open_nodes = set()
    try:
        root = loader.get_single_node()
        if root is None:
            raise ScenarioError(
                file, [Problem("", None, None, "the file is empty; expected a scenario mapping")]
            )
        data = _construct(loader, root, ())
    except _BadNode as exc:
        at = _loc(exc.node.start_mark)
        raise ScenarioError(file, [Problem(_dotted(exc.path), *at, exc.message)]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        pos: tuple[int | None, int | None] = _loc(mark) if mark else (None, None)
        what = " ".join(str(p) for p in (exc.context, exc.problem) if p) or str(exc)
        if "'\\t'" in what:
            what += " (indent with spaces, not tabs)"
        elif "block" in what or "mapping values are not allowed" in what:
            what += " (check the indentation of this line and the one before)"
        raise ScenarioError(file, [Problem("", *pos, f"not valid YAML: {what}")]) from None
    except yaml.YAMLError as exc:
        raise ScenarioError(file, [Problem("", None, None, f"not valid YAML: {exc}")]) from None
    except RecursionError:
        msg = "not valid YAML for a scenario: nested too deeply"
        raise ScenarioError(file, [Problem("", None, None, msg)]) from None
    finally:
        loader.dispose()
    return data, loader.node_marks


def _dotted(path: Iterable[str | int]) -> str:
    return ".".join(str(p) for p in path)


def _nearest_mark(marks: Mapping[Path_, Loc], path: Path_) -> Loc | None:
    for cut in range(len(path), -1, -1):
        if path[:cut] in marks:
            return marks[path[:cut]]
    return None


# -- wording ----------------------------------------------------------------------------


_TYPE_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "list_type": "a list",
    "none_required": "nothing (null)",
}


def _kind_of(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _found(value: Any) -> str:
    """How a found value reads in a message: "'many' (a string)", "an empty list"."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, dict | list):
        return f"{_kind_of(value)} {_short(value)}" if value else f"an empty {_kind_of(value)[2:]}"
    return f"{_short(value)} ({_kind_of(value)})"


def _closest(word: Any, options: Iterable[str]) -> str | None:
    """The valid name a typo most likely meant: a close spelling, or the one name that
    starts with what was written (`p_heed` → `p_heed_upstream`)."""
    names, text = list(options), str(word)
    close = difflib.get_close_matches(text, names, n=1, cutoff=0.6)
    if close:
        return close[0]
    starts = [n for n in names if n.startswith(text) or text.startswith(n)]
    return starts[0] if len(starts) == 1 and len(text) >= 3 else None


def _unknown_name(what: str, name: Any, known: Iterable[str]) -> str:
    names = list(known)
    close = _closest(name, names)
    if close:
        return f"unknown {what} {name!r}; did you mean {close!r}?"
    return f"unknown {what} {name!r}; expected one of: {', '.join(names)}"


def _quoted_options(expected: str) -> list[str]:
    return re.findall(r"'([^']*)'", expected)


def _bounds(field: FieldInfo | None) -> tuple[Any, Any]:
    """(lower, upper) bounds of a field, looking inside Optional[Annotated[...]]."""
    if field is None:
        return None, None
    metas: list[Any] = list(field.metadata)
    for arg in get_args(field.annotation):
        for inner in getattr(arg, "__metadata__", ()):
            metas.extend(getattr(inner, "metadata", [inner]))
    lo = hi = None
    for m in metas:
        lo = getattr(m, "ge", None) if getattr(m, "ge", None) is not None else lo
        lo = getattr(m, "gt", None) if getattr(m, "gt", None) is not None else lo
        hi = getattr(m, "le", None) if getattr(m, "le", None) is not None else hi
        hi = getattr(m, "lt", None) if getattr(m, "lt", None) is not None else hi
    return lo, hi


def _num(x: Any) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _message(err: Mapping[str, Any], root: type[BaseModel], path: Path_, key_error: bool) -> str:
    """One pydantic error as "expected X, found Y" (plus a suggestion where we have one)."""
    kind: str = err["type"]
    ctx: Mapping[str, Any] = err.get("ctx") or {}
    value = err.get("input")
    if kind == "extra_forbidden" and path:
        parent = _model_for_path(root, path[:-1])
        known = list(parent.model_fields) if parent else []
        close = _closest(path[-1], known)
        if close:
            return f"unknown key {path[-1]!r}; did you mean {close!r}?"
        return f"unknown key {path[-1]!r}; expected one of the keys: {', '.join(known)}"
    if kind == "missing":
        return f"missing required field {path[-1]!r}" if path else "missing required field"
    prefix = "name: " if key_error else ""
    if kind in _TYPE_EXPECTED:
        return f"{prefix}expected {_TYPE_EXPECTED[kind]}, found {_found(value)}"
    if kind in ("literal_error", "enum"):
        options = _quoted_options(str(ctx.get("expected", "")))
        msg = f"{prefix}expected one of {ctx.get('expected', '')}, found {_found(value)}"
        close = _closest(value, options) if isinstance(value, str) else None
        return msg + (f"; did you mean {close!r}?" if close else "")
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        parent = _model_for_path(root, path[:-1]) if path else None
        field = parent.model_fields.get(str(path[-1])) if parent and path else None
        lo, hi = _bounds(field)
        if lo == 0 and hi == 1:
            return f"expected a probability from 0 to 1, found {_num(value)}"
        if lo is not None and hi is not None:
            msg = f"expected a value from {_num(lo)} to {_num(hi)}, found {_num(value)}"
        else:
            op = {"greater_than_equal": ">=", "less_than_equal": "<=", "greater_than": ">"}
            bound = ctx.get("ge", ctx.get("le", ctx.get("gt", ctx.get("lt"))))
            msg = f"expected a value {op.get(kind, '<')} {_num(bound)}, found {_num(value)}"
        if kind in ("less_than_equal", "less_than") and path and path[-1] in _LIMITED:
            msg += f" ({_LIMITS_HINT})"
        return msg
    if kind in ("too_short", "too_long"):
        n = ctx.get("actual_length")
        n = len(value) if n is None and isinstance(value, dict | list | str) else n
        if kind == "too_short":
            want = ctx.get("min_length")
            return f"expected at least {want} item{'s' * (want != 1)}, found {n}"
        return f"expected at most {ctx.get('max_length')} items, found {n} ({_LIMITS_HINT})"
    if kind == "string_too_short":
        return f"{prefix}expected a non-empty string, found {_found(value)}"
    if kind == "string_too_long":
        n = len(value) if isinstance(value, str) else "more"
        return (
            f"{prefix}expected at most {ctx.get('max_length')} characters, found {n} "
            f"({_LIMITS_HINT})"
        )
    if kind == "string_pattern_mismatch":
        return f"{prefix}expected a name of letters, digits, '_', '.' or '-', found {_found(value)}"
    msg = str(err.get("msg", kind))
    for noise in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(noise)
    if kind in ("reference", "value_error", "assertion_error"):
        return msg
    return f"{prefix}{msg}, found {_found(value)}"


def _clean_loc(loc: Iterable[Any], data: Any, missing: bool) -> tuple[Path_, bool]:
    """A pydantic `loc` as a path through `data`: union tags ('str', 'list[str]',
    'function-after[...]') dropped, dict keys as the strings the marks use.
    Also returns whether the error is about a mapping key ('[key]')."""
    items = list(loc)
    out: list[str | int] = []
    node: Any = data
    key_error = False
    for i, el in enumerate(items):
        if el == "[key]":
            key_error = True
            continue
        if isinstance(node, dict):
            match = next((k for k in node if k == el or str(k) == str(el)), _NO)
            if match is not _NO:
                out.append(str(match))
                node = node[match]
            elif missing and i == len(items) - 1:
                out.append(str(el))
            continue
        if isinstance(node, list) and isinstance(el, int) and 0 <= el < len(node):
            out.append(el)
            node = node[el]
    return tuple(out), key_error


_NO = object()


def _problems_from(
    exc: ValidationError,
    data: Any,
    marks: Mapping[Path_, Loc],
    root: type[BaseModel] = Scenario,
    prefix: Path_ = (),
) -> list[Problem]:
    """Problems for a ValidationError of `root` validating `data`, found at `prefix`."""
    merged: dict[Path_, list[str]] = {}
    order: list[Path_] = []
    for err in exc.errors():
        path, key_error = _clean_loc(err["loc"], data, err["type"] == "missing")
        msg = _message(err, root, path, key_error)
        if path not in merged:
            merged[path] = []
            order.append(path)
        if msg not in merged[path]:
            merged[path].append(msg)
    # A typo of a required key is one problem, not two: fold "missing required field
    # 'kind'" into "unknown key 'knd'; did you mean 'kind'?".
    for path in order:
        for i, m in enumerate(merged[path]):
            if m.startswith("unknown key ") and "; did you mean " in m:
                meant = m.split("; did you mean ", 1)[1].strip("'?")
                twin = (*path[:-1], meant)
                if twin in merged and any(x.startswith("missing required") for x in merged[twin]):
                    merged[twin] = [x for x in merged[twin] if not x.startswith("missing required")]
                    merged[path][i] = f"{m} ({meant!r} is required)"
    problems: list[Problem] = []
    for path in order:
        msgs = merged[path]
        expected = [m for m in msgs if m.startswith("expected ") and ", found " in m]
        if len(expected) > 1:  # union branches: "expected a string or a list, found 5"
            wants = [m.split(", found ", 1)[0].removeprefix("expected ") for m in expected]
            if "a number" in wants and "an integer" in wants:
                wants.remove("an integer")
            found = expected[0].split(", found ", 1)[1]
            msgs = [f"expected {' or '.join(wants)}, found {found}"] + [
                m for m in msgs if m not in expected
            ]
        full = (*prefix, *path)
        line, col = _nearest_mark(marks, full) or (None, None)
        problems.extend(Problem(_dotted(full), line, col, m) for m in msgs)
    return problems


def _model_for_path(root: type[BaseModel], path: Path_) -> type[BaseModel] | None:
    """Walk `root`'s fields along `path`, dict keys and list indexes consumed by their
    containers; the model found there, if any."""
    model: Any = root
    i = 0
    while i < len(path):
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = model.model_fields.get(str(path[i]))
        if field is None:
            return None
        ann: Any = field.annotation
        i += 1
        while True:  # unwrap containers: each dict / list consumes one path element
            origin = get_origin(ann)
            args = [a for a in get_args(ann) if a is not type(None)]
            if origin in (dict, list) and args:
                ann = args[-1]
                i += 1
                continue
            if origin in (Union, UnionType) and args:
                models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
                ann = models[0] if models else args[0]
                if not models and get_origin(ann) is None:
                    break
                continue
            break
        model = ann
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


# -- checks the model cannot make ------------------------------------------------------


def _semantic_problems(
    s: Scenario, data: dict[str, Any], marks: Mapping[Path_, Loc]
) -> list[Problem]:
    from errorflow.agents.profiles import PROFILES, Behaviour, behaviour
    from errorflow.agents.world import ARG_MODELS
    from errorflow.policies.config import PolicyConfig
    from errorflow.policies.strategies import DEFAULT_STRATEGY, PRESETS, build_policy, deep_merge

    problems: list[Problem] = []

    def add(path: Path_, message: str) -> None:
        line, col = _nearest_mark(marks, path) or (None, None)
        problems.append(Problem(_dotted(path), line, col, message))

    if len(s.tools) > MAX_TOOLS:
        add(
            ("tools",), f"expected at most {MAX_TOOLS} tools, found {len(s.tools)} ({_LIMITS_HINT})"
        )

    for name, agent in s.agents.items():
        # -- policy: a free mapping, validated the way the agent will build it
        at: Path_ = ("agents", name, "policy")
        strategy = agent.policy.get("strategy", DEFAULT_STRATEGY)
        overrides = {k: v for k, v in agent.policy.items() if k != "strategy"}
        if not isinstance(strategy, str):
            add(
                (*at, "strategy"),
                f"expected a strategy name ({', '.join(PRESETS)}), found {_found(strategy)}",
            )
        elif strategy not in PRESETS:
            add((*at, "strategy"), _unknown_name("strategy", strategy, PRESETS))
        else:
            try:
                policy = build_policy(strategy, overrides)
            except ValidationError as exc:
                merged = deep_merge(PRESETS[strategy], overrides)
                problems.extend(_problems_from(exc, merged, marks, PolicyConfig, at))
            except ValueError as exc:
                add(at, str(exc))
            else:
                if policy.guards.max_steps > MAX_STEPS:
                    add(
                        (*at, "guards", "max_steps"),
                        f"expected at most {MAX_STEPS} steps per task, found "
                        f"{policy.guards.max_steps} ({_LIMITS_HINT})",
                    )
        # -- model: the simulated model's profile and behaviour overrides
        mat: Path_ = ("agents", name, "model")
        if agent.model.backend == "simulated":
            if agent.model.profile not in PROFILES:
                add(
                    (*mat, "profile"), _unknown_name("model profile", agent.model.profile, PROFILES)
                )
            else:
                try:
                    behaviour(agent.model.profile, agent.model.params)
                except ValidationError as exc:
                    merged = {**PROFILES[agent.model.profile], **agent.model.params}
                    problems.extend(_problems_from(exc, merged, marks, Behaviour, (*mat, "params")))
        elif not agent.model.model:
            add(
                mat,
                f"missing required field 'model' for backend {agent.model.backend!r} "
                "(the name of the model to call)",
            )

    for doc_id, text in s.world.documents.items():
        size = len(text.encode("utf-8"))
        if size > MAX_DOCUMENT_BYTES:
            add(
                ("world", "documents", doc_id),
                f"expected a document of at most {MAX_DOCUMENT_BYTES} bytes, found {size} "
                f"bytes ({_LIMITS_HINT})",
            )

    total = 0
    for i, need in enumerate(s.task.needs):
        at = ("task", "needs", i)
        tool = s.tools.get(need.tool)
        if tool is None:
            continue  # reported by Scenario._references
        args_model = ARG_MODELS[tool.kind]
        if need.arg not in args_model.model_fields:
            add(
                (*at, "arg"),
                f"tool {need.tool!r} (kind {tool.kind}) takes no argument {need.arg!r}; "
                + (
                    f"did you mean {c!r}?"
                    if (c := _closest(need.arg, args_model.model_fields))
                    else f"expected one of: {', '.join(args_model.model_fields)}"
                ),
            )
        else:
            try:
                args_model.model_validate({need.arg: need.value})
            except ValidationError as exc:
                for err in exc.errors():
                    if err["loc"][:1] != (need.arg,):
                        continue
                    sub, _ = _clean_loc(err["loc"][1:], need.value, False)
                    msg = _message(err, args_model, (need.arg, *sub), False)
                    add(
                        (*at, "value", *sub),
                        f"not a valid {need.arg!r} for tool {need.tool!r} (kind {tool.kind}): "
                        + msg,
                    )
        total += _findings_bytes(s, need.value, tool.kind)
        if total > MAX_FINDINGS_BYTES:
            add(
                at,
                f"expected the needs to fetch at most {MAX_FINDINGS_BYTES} bytes (they travel "
                f"in one message), found {total} bytes by this need ({_LIMITS_HINT})",
            )
            total = -(10**18)  # report once
    return problems


def _sweep_problems(s: Scenario, data: dict[str, Any], marks: Mapping[Path_, Loc]) -> list[Problem]:
    """Each sweep value applied alone to the scenario must give a valid scenario."""
    import copy

    from errorflow.scenario.overrides import OverrideError, set_path

    problems: list[Problem] = []
    if s.sweep is None:
        return problems
    for i, axis in enumerate(s.sweep.axes):
        for label, overrides in axis.values.items():
            for key, value in overrides.items():
                at: Path_ = ("sweep", "axes", i, "values", label, key)
                line, col = _nearest_mark(marks, at) or (None, None)
                cell = copy.deepcopy({k: v for k, v in data.items() if k != "sweep"})
                try:
                    set_path(cell, key, value)
                    _validate(cell, {}, "<sweep>")
                except OverrideError as exc:
                    msg = str(exc).removeprefix(f"{key}: ")
                    problems.append(Problem(_dotted(at), line, col, f"cannot apply: {msg}"))
                except ScenarioError as exc:
                    inner = exc.problems[0]
                    more = f" (and {len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
                    where = f"{inner.path}: " if inner.path else ""
                    msg = f"this override gives an invalid scenario: {where}{inner.message}{more}"
                    problems.append(Problem(_dotted(at), line, col, msg))
    return problems


def _findings_bytes(s: Scenario, value: str | list[str], kind: str) -> int:
    """A generous estimate of how many bytes the answer to one need carries."""
    values = value if isinstance(value, list) else [value]
    if kind == "batch_fetch":
        return sum(len(s.world.documents.get(v, "").encode("utf-8")) + len(v) for v in values)
    if kind == "metric_store":
        return sum(len(json.dumps(s.world.metrics.get(v), ensure_ascii=False)) for v in values)
    if kind == "paper_search":
        return sum(len(p.id) + 4 for p in s.world.papers)
    return 0


# -- entry points -----------------------------------------------------------------------


def _validate(data: Any, marks: Mapping[Path_, Loc], file: str) -> Scenario:
    if not isinstance(data, dict):
        msg = f"expected a mapping of scenario fields at top level, found {_found(data)}"
        raise ScenarioError(file, [Problem("", 1, 1, msg)])
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(file, _sorted(_problems_from(exc, data, marks))) from None
    problems = _semantic_problems(scenario, data, marks) or _sweep_problems(scenario, data, marks)
    if problems:
        raise ScenarioError(file, _sorted(problems))
    return scenario


def _sorted(problems: list[Problem]) -> list[Problem]:
    return sorted(problems, key=lambda p: (p.line or 0, p.column or 0))


def load(path: Path) -> Scenario:
    """Read, parse and validate a scenario file; every problem raises ScenarioError."""
    file = str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ScenarioError(file, [Problem("", None, None, _not_found(path))]) from None
    except IsADirectoryError:
        msg = "is a directory; expected a scenario file (YAML)"
        raise ScenarioError(file, [Problem("", None, None, msg)]) from None
    except OSError as exc:
        msg = f"cannot be read: {exc.strerror or exc}"
        raise ScenarioError(file, [Problem("", None, None, msg)]) from None
    if len(raw) > MAX_SCENARIO_BYTES:
        msg = f"expected at most {MAX_SCENARIO_BYTES} bytes, found {len(raw)} ({_LIMITS_HINT})"
        raise ScenarioError(file, [Problem("", None, None, msg)])
    if b"\x00" in raw:
        msg = "binary file (contains NUL bytes); expected a YAML text file"
        raise ScenarioError(file, [Problem("", None, None, msg)])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        msg = f"expected UTF-8 text, found byte 0x{raw[exc.start]:02x} (a binary file?)"
        raise ScenarioError(file, [Problem("", line, col, msg)]) from None
    if not text.strip():
        msg = "the file is empty; expected a scenario mapping"
        raise ScenarioError(file, [Problem("", None, None, msg)])
    data, marks = parse_yaml(text, file)
    return _validate(data, marks, file)


def load_text(text: str, file: str = "<string>") -> Scenario:
    """Parse and validate scenario YAML held in a string."""
    data, marks = parse_yaml(text, file)
    return _validate(data, marks, file)


def _not_found(path: Path) -> str:
    msg = "no such file; expected a scenario file"
    try:
        from errorflow.scenario.bundled import bundled

        names = ", ".join(bundled())
    except (OSError, ImportError):
        names = ""
    return msg + (f" or a bundled scenario name ({names})" if names else "")
