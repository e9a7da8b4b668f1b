"""Python tools' code: loading `package.module:callable` or `path/file.py:callable`,
and the argument model its type hints make.

Here, below the agents, because the loader imports a scenario's tools to validate it
(the code exists, is callable, and every need's arguments fit its parameters); the
agents run it (errorflow.world.python_tool). Loading RUNS the module's code, as
`import` does: a scenario with Python tools is a program, to be trusted like one.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import Field, create_model

from errorflow.core.errors import InputError
from errorflow.core.tool_context import ToolContext
from errorflow.scenario.spec.arg_schema import ArgSpec, args_model
from errorflow.scenario.spec.catalog import ToolArgs


class PythonToolError(InputError):
    """A Python tool cannot be loaded or described; the message is one line, fit for a
    `file:line:col: ...` report."""


# -- loading --------------------------------------------------------------------------
_FILE_MODULES: dict[Path, types.ModuleType] = {}


def load_callable(
    ref: str, base_dir: str | Path | None = None, *, what: str = "python tool"
) -> Callable[..., object]:
    """The callable `ref` names: `package.module:name` (an importable module) or
    `path/to/file.py:name` (absolute, or relative to `base_dir`, by default the working
    directory). `name` may be dotted (`module:Class.method`). A file is imported once
    per resolved path, under a module name of its own, so two `tools.py` never clash."""
    target, _, attr_path = ref.strip().rpartition(":")
    attrs = attr_path.split(".")
    if not target or not all(a.isidentifier() for a in attrs):
        raise PythonToolError(
            f"{what} {ref!r} must be 'package.module:function' or 'path/to/file.py:function'"
        )
    if target.endswith(".py") or "/" in target or "\\" in target:
        module = _load_file(Path(target), base_dir)
    elif all(part.isidentifier() for part in target.split(".")):
        module = _import_module(target)
    else:
        raise PythonToolError(
            f"{what} {ref!r}: {target!r} is neither a module name nor a .py file path"
        )
    obj: object = module
    for i, attr in enumerate(attrs):
        if not hasattr(obj, attr):
            owner = ".".join([target, *attrs[:i]]) if i else target
            raise PythonToolError(f"{what} {ref!r}: {owner!r} has no attribute {attr!r}")
        obj = getattr(obj, attr)
    if not callable(obj):
        raise PythonToolError(f"{what} {ref!r} is a {type(obj).__name__}, not a callable")
    return obj


#: Packages errorflow's own extras provide, by top-level module: what to install.
EXTRA_OF = {"opentelemetry": "otel", "gmqtt": "gmqtt"}


def _failed(what: str, exc: Exception) -> PythonToolError:
    """An import that failed, in one line; a missing package gets what installs it."""
    text = f"importing {what} failed: {_one_line(exc)}"
    if isinstance(exc, ModuleNotFoundError) and exc.name is not None:
        top = exc.name.split(".")[0]
        extra = EXTRA_OF.get(top)
        hint = f"pip install 'errorflow[{extra}]'" if extra else f"install {top!r}"
        text += f" ({hint})"
    return PythonToolError(text)


def _import_module(name: str) -> types.ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        # The module itself is missing, or something it imports is: say which.
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise PythonToolError(
                f"no module named {name!r} (is it installed in this environment?)"
            ) from None
        raise _failed(repr(name), exc) from None
    except Exception as exc:  # the module's own code failed: report, never crash
        raise _failed(repr(name), exc) from None


def _load_file(path: Path, base_dir: str | Path | None) -> types.ModuleType:
    if not path.is_absolute():
        path = Path(base_dir if base_dir is not None else Path.cwd()) / path
    path = path.resolve()
    cached = _FILE_MODULES.get(path)
    if cached is not None:
        return cached
    if not path.is_file():
        raise PythonToolError(f"no such file: {path}")
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    stem = "".join(c if c.isalnum() else "_" for c in path.stem)
    name = f"errorflow_user_tool_{stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PythonToolError(f"cannot import {path}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as `import` does: dataclasses and pydantic models in
    # the file resolve their annotations through sys.modules.
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise _failed(str(path), exc) from None
    _FILE_MODULES[path] = module
    return module


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# -- the argument schema --------------------------------------------------------------
def signature_args_model(
    fn: Callable[..., object], tool_name: str, declared: Mapping[str, ArgSpec] | None = None
) -> type[ToolArgs]:
    """The strict argument model of a Python tool. With `declared` (the scenario's
    `args:`), that declaration, checked against the callable's parameters; without,
    one built from the parameters: the hint is the type (none: Any), a default makes
    the argument optional. Types JSON cannot carry exactly (datetime, Enum, Path, ...)
    are validated leniently so that the model's strings convert; the rest strictly."""
    params = _parameters(fn, tool_name, allow_var_keyword=declared is not None)
    if declared is not None:
        _check_declared(fn, tool_name, params, declared)
        return args_model(tool_name, dict(declared))
    fields: dict[str, Any] = {}
    for p in params.values():
        hint: Any = Any if p.annotation is inspect.Parameter.empty else p.annotation
        if not _json_native(hint):
            hint = Annotated[hint, Field(strict=False)]
        fields[p.name] = (hint, ... if p.default is inspect.Parameter.empty else p.default)
    try:
        model: type[ToolArgs] = create_model(f"{tool_name}_args", __base__=ToolArgs, **fields)
        model.model_json_schema()  # the schema a model is shown must exist
    except Exception as exc:
        raise PythonToolError(
            f"tool {tool_name!r}: the parameters of {_name(fn)} make no argument schema "
            f"({_one_line(exc)}); declare its args in the scenario"
        ) from None
    return model


def _parameters(
    fn: Callable[..., object], tool: str, *, allow_var_keyword: bool
) -> dict[str, inspect.Parameter]:
    try:
        sig = inspect.signature(fn, eval_str=True)
    except (ValueError, TypeError) as exc:
        raise PythonToolError(f"tool {tool!r}: {_name(fn)} has no signature: {exc}") from None
    except Exception as exc:  # a string annotation that does not evaluate
        raise PythonToolError(
            f"tool {tool!r}: the type hints of {_name(fn)} do not resolve: {_one_line(exc)}"
        ) from None
    params: dict[str, inspect.Parameter] = {}
    for p in sig.parameters.values():
        if _is_context(p):
            continue  # errorflow passes it; no argument of the tool
        if p.kind is p.VAR_POSITIONAL:
            raise PythonToolError(
                f"tool {tool!r}: {_name(fn)} takes *{p.name}; tools are called with named "
                "arguments, so give it named parameters"
            )
        if p.kind is p.VAR_KEYWORD:
            if allow_var_keyword:
                continue
            raise PythonToolError(
                f"tool {tool!r}: {_name(fn)} takes **{p.name}, which says nothing about its "
                "arguments; give it named parameters or declare its args in the scenario"
            )
        if p.kind is p.POSITIONAL_ONLY:
            if p.default is not p.empty:
                continue  # never passed by name: it keeps its default
            raise PythonToolError(
                f"tool {tool!r}: parameter {p.name!r} of {_name(fn)} is positional-only; "
                "tools are called with named arguments"
            )
        params[p.name] = p
    return params


def context_parameter(fn: Callable[..., object]) -> str | None:
    """The name of the parameter that takes a `ToolContext`, if the callable has one."""
    try:
        sig = inspect.signature(fn, eval_str=True)
    except Exception:  # reported by signature_args_model
        return None
    return next((p.name for p in sig.parameters.values() if _is_context(p)), None)


def _is_context(p: inspect.Parameter) -> bool:
    """Annotated `ToolContext`, or named `ctx` without an annotation."""
    if p.annotation is ToolContext:
        return True
    return p.name == "ctx" and p.annotation is inspect.Parameter.empty


def _check_declared(
    fn: Callable[..., object],
    tool: str,
    params: Mapping[str, inspect.Parameter],
    declared: Mapping[str, ArgSpec],
) -> None:
    takes_any = any(p.kind is p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())
    for arg in declared:
        if arg not in params and not takes_any:
            raise PythonToolError(
                f"tool {tool!r}: declared argument {arg!r} is not a parameter of {_name(fn)} "
                f"(it takes {', '.join(params) or 'none'})"
            )
    for p in params.values():
        if p.default is p.empty and p.name not in declared:
            raise PythonToolError(
                f"tool {tool!r}: {_name(fn)} requires {p.name!r}, which the declared args lack"
            )
        spec = declared.get(p.name)
        if spec is not None and p.default is p.empty and not spec.required:
            raise PythonToolError(
                f"tool {tool!r}: argument {p.name!r} is declared optional but {_name(fn)} "
                "requires it; declare it required or give the parameter a default"
            )


_NATIVE: frozenset[object] = frozenset({str, int, float, bool, type(None), list, dict, Any})


def _json_native(hint: Any) -> bool:
    """Whether strict validation accepts what JSON decodes to for this hint."""
    if hint in _NATIVE:
        return True
    origin = get_origin(hint)
    if origin is Literal:
        return True
    if origin is Annotated:
        return _json_native(get_args(hint)[0])
    if origin in (list, dict, Union, types.UnionType):
        return all(_json_native(a) for a in get_args(hint))
    return False


def _name(fn: Callable[..., object]) -> str:
    return str(getattr(fn, "__qualname__", None) or type(fn).__name__)


def resolve_tool_paths(data: object, base_dir: Path) -> object:
    """`data` (a scenario's plain data) with each Python tool's `function` made absolute
    against `base_dir` (the scenario file's folder, `absolute_ref`), so the scenario runs
    the same code from any working directory and in every `errorflow agent`."""
    if not isinstance(data, dict) or not isinstance(data.get("tools"), dict):
        return data
    tools: dict[object, object] = {}
    for name, tool in data["tools"].items():
        ref = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(tool, dict) and tool.get("kind") == "python" and isinstance(ref, str):
            tool = {**tool, "function": absolute_ref(ref, base_dir)}
        tools[name] = tool
    return {**data, "tools": tools}


def resolve_agent_paths(data: object, base_dir: Path) -> object:
    """`data` with each python agent's `function` made absolute against `base_dir`, as
    a Python tool's is."""
    if not isinstance(data, dict) or not isinstance(data.get("agents"), dict):
        return data
    agents: dict[object, object] = {}
    for name, agent in data["agents"].items():
        ref = agent.get("function") if isinstance(agent, dict) else None
        if isinstance(agent, dict) and isinstance(ref, str):
            agent = {**agent, "function": absolute_ref(ref, base_dir)}
        agents[name] = agent
    return {**data, "agents": agents}


def absolute_ref(ref: str, base_dir: Path) -> str:
    """A `file.py:callable` made absolute against `base_dir`, and a `module:callable`
    whose module is a file in that folder (`module.py`, or `pkg/module.py` for
    `pkg.module`) too; any other module name is imported as is, and anything else is
    left for validation to refuse."""
    if ":" not in ref:
        return ref
    target, _, attr = ref.strip().rpartition(":")
    is_file = target.endswith(".py") or "/" in target or "\\" in target
    dotted = all(p.isidentifier() for p in target.split("."))
    local = base_dir / (target.replace(".", "/") + ".py" if dotted else "-")
    if is_file and not Path(target).is_absolute():
        return f"{(base_dir / target).resolve()}:{attr}"
    if not is_file and local.is_file():  # a module beside the scenario file
        return f"{local.resolve()}:{attr}"
    return ref
