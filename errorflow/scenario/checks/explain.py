"""Pydantic's validation errors, said as problems a person can act on.

Each error becomes "expected X, found Y" (plus the closest valid name for a typo), at
the path of the file's data it is about, pointed at that node's line. Errors on one
path are merged: the branches of a union read as one ("expected a string or a list,
found 5"), and a typo of a required key is one problem, not two.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from errorflow.scenario.checks.wording import (
    closest,
    found,
    num,
    quoted_options,
    short,
)
from errorflow.scenario.problems import (
    LIMITS_HINT,
    Marks,
    NodePath,
    Problem,
    problem_at,
)

#: Fields whose upper bound is a documented limit (the rest are ranges of meaning).
_LIMITED = frozenset({"trials", "max_in_flight", "first_n", "max_tokens", "max_steps"})

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
_BOUND_OPS = {"greater_than_equal": ">=", "less_than_equal": "<=", "greater_than": ">"}


@dataclass(frozen=True)
class _Error:
    """One pydantic error, with what its wording needs to know."""

    details: ErrorDetails
    root: type[BaseModel]
    path: NodePath  # the data path it is about
    prefix: str  # "name: " when it is about a mapping key, not its value
    data: Any = None  # the data validated (picks the member of a union tagged by `kind`)

    @property
    def kind(self) -> str:
        return self.details["type"]

    @property
    def ctx(self) -> Mapping[str, Any]:
        return self.details.get("ctx") or {}

    @property
    def value(self) -> Any:
        return self.details.get("input")


def _unknown_key(e: _Error) -> str | None:
    if not e.path:
        return None
    parent = model_for_path(e.root, e.path[:-1], e.data)
    # A block may word a key it does not take itself (a field of another kind's).
    foreign = getattr(parent, "foreign_key", None)
    said = foreign(str(e.path[-1]), e.value) if callable(foreign) else None
    if isinstance(said, str):
        return said
    known = list(parent.model_fields) if parent else []
    close = closest(e.path[-1], known)
    if close:
        return f"unknown key {short(e.path[-1])}; did you mean {close!r}?"
    return f"unknown key {short(e.path[-1])}; expected one of the keys: {', '.join(known)}"


def _missing(e: _Error) -> str:
    return f"missing required field {e.path[-1]!r}" if e.path else "missing required field"


def _wrong_type(e: _Error) -> str:
    return f"{e.prefix}expected {_TYPE_EXPECTED[e.kind]}, found {found(e.value)}"


def _not_an_option(e: _Error) -> str:
    expected = str(e.ctx.get("expected", ""))
    msg = f"{e.prefix}expected one of {expected}, found {found(e.value)}"
    close = closest(e.value, quoted_options(expected)) if isinstance(e.value, str) else None
    return msg + (f"; did you mean {close!r}?" if close else "")


def _unknown_tag(e: _Error) -> str:
    """A tagged choice (a fault's `kind`) naming no known tag (said at the tag's key)."""
    tag = e.ctx.get("tag")
    expected = str(e.ctx.get("expected_tags", ""))
    first, _, last = expected.rpartition(", ")
    msg = f"expected one of {f'{first} or {last}' if first else last}, found {found(tag)}"
    close = closest(tag, quoted_options(expected)) if isinstance(tag, str) else None
    return msg + (f"; did you mean {close!r}?" if close else "")


def _missing_tag(e: _Error) -> str:
    key = _discriminator(e.details)
    if e.path and e.path[-1] != key:  # a typo of the tag's key (`_tag_key`)
        return f"unknown key {short(e.path[-1])}; did you mean {key!r}? ({key!r} is required)"
    return f"missing required field {key!r}"


def _tag_key(err: ErrorDetails, node: Any) -> str:
    """Where a union's tag error is: its key, or the key that is a typo of it."""
    key = _discriminator(err)
    if err["type"] == "union_tag_not_found" and isinstance(node, dict):
        typo = next((k for k in node if closest(str(k), [key]) == key), None)
        if typo is not None:
            return str(typo)
    return key


def _node_at(data: Any, path: NodePath) -> Any:
    for key in path:
        data = _child(data, key)
    return data


def _discriminator(err: ErrorDetails) -> str:
    """The key that tags a union's members (`kind`)."""
    return str((err.get("ctx") or {}).get("discriminator", "kind")).strip("'")


def _out_of_bounds(e: _Error) -> str:
    parent = model_for_path(e.root, e.path[:-1], e.data) if e.path else None
    field = parent.model_fields.get(str(e.path[-1])) if parent and e.path else None
    lo, hi = _bounds(field)
    if lo == 0 and hi == 1:
        return f"expected a probability from 0 to 1, found {num(e.value)}"
    if lo is not None and hi is not None:
        msg = f"expected a value from {num(lo)} to {num(hi)}, found {num(e.value)}"
    else:
        ctx = e.ctx
        bound = ctx.get("ge", ctx.get("le", ctx.get("gt", ctx.get("lt"))))
        op = _BOUND_OPS.get(e.kind, "<")
        msg = f"expected a value {op} {num(bound)}, found {num(e.value)}"
    if e.kind in ("less_than_equal", "less_than") and e.path and e.path[-1] in _LIMITED:
        msg += f" ({LIMITS_HINT})"
    return msg


def _wrong_length(e: _Error) -> str:
    n = e.ctx.get("actual_length")
    n = len(e.value) if n is None and isinstance(e.value, dict | list | str) else n
    if e.kind == "too_short":
        want = e.ctx.get("min_length")
        return f"expected at least {want} item{'s' * (want != 1)}, found {n}"
    return f"expected at most {e.ctx.get('max_length')} items, found {n} ({LIMITS_HINT})"


def _empty_string(e: _Error) -> str:
    return f"{e.prefix}expected a non-empty string, found {found(e.value)}"


def _long_string(e: _Error) -> str:
    """The limit and the length, and the start of the value (a name of a megabyte is
    recognised by its start, never repeated)."""
    if not isinstance(e.value, str):
        return f"{e.prefix}expected at most {e.ctx.get('max_length')} characters ({LIMITS_HINT})"
    return (
        f"{e.prefix}expected at most {e.ctx.get('max_length')} characters, found "
        f"{len(e.value)}: {short(e.value)} ({LIMITS_HINT})"
    )


def _not_a_name(e: _Error) -> str:
    return f"{e.prefix}expected a name of letters, digits, '_', '.' or '-', found {found(e.value)}"


def _as_pydantic_says(e: _Error) -> str:
    msg = str(e.details.get("msg", e.kind))
    for noise in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(noise)
    if e.kind in ("reference", "value_error", "assertion_error"):
        return msg  # our own words, from a validator
    return f"{e.prefix}{msg}, found {found(e.value)}"


_WORDING: dict[str, Callable[[_Error], str | None]] = {
    "extra_forbidden": _unknown_key,
    "missing": _missing,
    **dict.fromkeys(_TYPE_EXPECTED, _wrong_type),
    **dict.fromkeys(("literal_error", "enum"), _not_an_option),
    **dict.fromkeys((*_BOUND_OPS, "less_than"), _out_of_bounds),
    **dict.fromkeys(("too_short", "too_long"), _wrong_length),
    "string_too_short": _empty_string,
    "string_too_long": _long_string,
    "string_pattern_mismatch": _not_a_name,
    "union_tag_invalid": _unknown_tag,
    "union_tag_not_found": _missing_tag,
}


def message(
    err: ErrorDetails, root: type[BaseModel], path: NodePath, key_error: bool, data: Any = None
) -> str:
    """One pydantic error as "expected X, found Y" (plus a suggestion where we have one)."""
    e = _Error(err, root, path, "name: " if key_error else "", data)
    wording = _WORDING.get(e.kind)
    said = wording(e) if wording is not None else None
    return said if said is not None else _as_pydantic_says(e)


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


_NO = object()


def clean_loc(loc: Iterable[Any], data: Any, missing: bool) -> tuple[NodePath, bool]:
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


def problems_from(
    exc: ValidationError,
    data: Any,
    marks: Marks,
    root: type[BaseModel],
    prefix: NodePath = (),
) -> list[Problem]:
    """Problems for a ValidationError of `root` validating `data`, found at `prefix`."""
    merged = _messages_by_path(exc, data, root)
    _fold_typos_of_required_keys(merged)
    return [
        problem_at(marks, (*prefix, *path), msg)
        for path, msgs in merged.items()
        for msg in _join_union_branches(msgs)
    ]


def _messages_by_path(
    exc: ValidationError, data: Any, root: type[BaseModel]
) -> dict[NodePath, list[str]]:
    """Each error's message under its data path, paths in the order pydantic found them."""
    merged: dict[NodePath, list[str]] = {}
    for err in exc.errors():
        path, key_error = clean_loc(err["loc"], data, err["type"] == "missing")
        if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
            path = (*path, _tag_key(err, _node_at(data, path)))
        msg = message(err, root, path, key_error, data)
        msgs = merged.setdefault(path, [])
        if msg not in msgs:
            msgs.append(msg)
    return merged


def _fold_typos_of_required_keys(merged: dict[NodePath, list[str]]) -> None:
    """A typo of a required key is one problem, not two: fold "missing required field
    'kind'" into "unknown key 'knd'; did you mean 'kind'?"."""
    for path, msgs in merged.items():
        for i, m in enumerate(msgs):
            if not (m.startswith("unknown key ") and "; did you mean " in m):
                continue
            meant = m.split("; did you mean ", 1)[1].strip("'?")
            twin = merged.get((*path[:-1], meant))
            if twin is not None and any(x.startswith("missing required") for x in twin):
                twin[:] = [x for x in twin if not x.startswith("missing required")]
                msgs[i] = f"{m} ({meant!r} is required)"


def _join_union_branches(msgs: list[str]) -> list[str]:
    """The branches of a union as one: "expected a string or a list, found 5"."""
    expected = [m for m in msgs if m.startswith("expected ") and ", found " in m]
    if len(expected) <= 1:
        return msgs
    wants = [m.split(", found ", 1)[0].removeprefix("expected ") for m in expected]
    if "a number" in wants and "an integer" in wants:
        wants.remove("an integer")
    found_ = expected[0].split(", found ", 1)[1]
    return [f"expected {' or '.join(wants)}, found {found_}"] + [
        m for m in msgs if m not in expected
    ]


def model_for_path(
    root: type[BaseModel], path: NodePath, data: Any = None
) -> type[BaseModel] | None:
    """Walk `root`'s fields along `path`, dict keys and list indexes consumed by their
    containers; the model found there, if any. Of a union of models, the one whose
    `kind` the data there names (`data`: what was validated), else the first."""
    model: Any = root
    node: Any = data
    i = 0
    while i < len(path):
        if not _is_model(model):
            return None
        field = model.model_fields.get(str(path[i]))
        if field is None:
            return None
        node = _child(node, path[i])
        i += 1
        ann: Any = field.annotation
        while True:
            origin = get_origin(ann)
            args = [a for a in get_args(ann) if a is not type(None)]
            if origin is Annotated:
                ann = args[0]
            elif origin in (dict, list) and args:
                ann = args[-1]
                node = _child(node, path[i]) if i < len(path) else None
                i += 1
            elif origin in (Union, UnionType) and args:
                models = [a for a in args if _is_model(a)]
                ann = _tagged(models, node) if models else args[0]
                if not models and get_origin(ann) is None:
                    break
            else:
                break
        model = ann
    return model if _is_model(model) else None


def _is_model(ann: Any) -> bool:
    return isinstance(ann, type) and issubclass(ann, BaseModel)


def _child(node: Any, key: str | int) -> Any:
    if isinstance(node, dict):
        return next((v for k, v in node.items() if k == key or str(k) == str(key)), None)
    if isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
        return node[key]
    return None


def _tagged(models: list[Any], node: Any) -> Any:
    """The member of a union the data names by its `kind` (else the first)."""
    tag = node.get("kind") if isinstance(node, dict) else None
    for m in models:
        field = m.model_fields.get("kind")
        if field is not None and tag is not None and tag in get_args(field.annotation):
            return m
    return models[0]
