"""User tools written in Python: `function: package.module:callable` in a scenario.

A scenario can name a callable of its own (`my_pkg.tools:lookup`, or a file next to the
scenario, `tools/lookup.py:lookup`) so that a user studies errorflow's policies on
their real tool code, an httpx client against a service they run for instance. This
module loads the callable, builds its argument schema from its type hints (or takes
the one the scenario declares), and runs one call bounded by a timeout. It does not
classify failures: the callable raises whatever its libraries raise and the edge
(errorflow.policies.classify, foreign_errors) turns that into an error code; a result
that is a refusal (`{"ok": false, "reason": ...}`) is recognised by `business_error`.

Loading a tool RUNS its module's code, as `import` does: a scenario with Python tools
is a program, to be trusted like one.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from errorflow.core.daemon_call import in_daemon_thread
from errorflow.core.outside_time import outside_call
from errorflow.core.tool_context import ToolContext
from errorflow.core.tool_errors import CallTimeout
from errorflow.scenario.python_ref import (
    PythonToolError,
    context_parameter,
    load_callable,
    signature_args_model,
)
from errorflow.scenario.spec.arg_schema import ArgSpec
from errorflow.scenario.spec.catalog import ToolArgs
from errorflow.scenario.spec.tool_model import BusinessFailure

JsonScalar = str | int | float | bool | None

__all__ = [
    "BusinessFailure",
    "BusinessRule",
    "PythonTool",
    "PythonToolError",
    "PythonToolTimeout",
    "business_error",
    "load_callable",
    "signature_args_model",
]


class PythonToolTimeout(CallTimeout, TimeoutError):
    """The callable did not return within the call's timeout. A TimeoutError, and also
    errorflow's own CallTimeout (with `waited_s`), so the tool gate accounts for it as
    it does for a simulated tool's timeout."""


def _name(fn: Callable[..., object]) -> str:
    return str(getattr(fn, "__qualname__", None) or type(fn).__name__)


# -- a refusal in the result ----------------------------------------------------------
class BusinessRule(Protocol):
    """What `business_error` reads of a rule: the scenario's `business_failure:`
    (errorflow.scenario.spec.tool_model.BusinessFailure, re-exported here) or anything alike."""

    @property
    def field(self) -> str: ...
    @property
    def equals(self) -> JsonScalar: ...
    @property
    def reason_field(self) -> str | None: ...


def business_error(rule: BusinessRule, result: object) -> str | None:
    """The refusal's reason when `result` is one under `rule`, else None: the
    `reason_field`'s text, or "<field> is <equals>" when the result gives none. A result
    that is not a mapping, or lacks the field, is no refusal; JSON's `false` is not `0`."""
    if not isinstance(result, Mapping) or rule.field not in result:
        return None
    if not _same(result[rule.field], rule.equals):
        return None
    reason = result.get(rule.reason_field) if rule.reason_field is not None else None
    if isinstance(reason, str) and reason.strip():
        return reason
    if reason is not None and not isinstance(reason, str):
        return str(reason)
    return f"{rule.field} is {_json_text(rule.equals)}"


def _same(value: object, expected: JsonScalar) -> bool:
    # JSON's false is not 0, nor true 1: Python's `False == 0` must not make a refusal.
    if isinstance(expected, bool) or isinstance(value, bool):
        return value is expected
    if expected is None:
        return value is None
    return type(value) in (int, float, str) and value == expected


def _json_text(value: JsonScalar) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str) else str(value)


# -- running one call -----------------------------------------------------------------
class PythonTool:
    """A loaded callable, its argument model and one way to run it."""

    def __init__(
        self,
        fn: Callable[..., object],
        *,
        name: str | None = None,
        args_model: type[ToolArgs] | None = None,
        ref: str | None = None,
    ) -> None:
        self.fn = fn
        self.name = name or _name(fn)
        self.ref = ref
        self._args_model = args_model
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
        )
        #: the parameter that takes a ToolContext, if any (passed by errorflow)
        self.context_param = context_parameter(fn)
        doc = inspect.getdoc(fn) or ""
        #: the callable's docstring, first paragraph: a description for the model
        self.description = " ".join(doc.split("\n\n")[0].split())

    @property
    def args_model(self) -> type[ToolArgs]:
        """The model given, else the one its type hints make (built on first use)."""
        if self._args_model is None:
            self._args_model = signature_args_model(self.fn, self.name)
        return self._args_model

    @classmethod
    def load(
        cls,
        name: str,
        ref: str,
        *,
        base_dir: str | Path | None = None,
        declared: Mapping[str, ArgSpec] | None = None,
    ) -> PythonTool:
        fn = load_callable(ref, base_dir)
        return cls(fn, name=name, args_model=signature_args_model(fn, name, declared), ref=ref)

    @staticmethod
    def arguments(args: ToolArgs) -> dict[str, object]:
        """The keyword arguments of a validated call: only those the caller set (a
        parameter left out keeps the callable's own default), values as validated."""
        return {key: getattr(args, key) for key in args.model_fields_set}

    async def call(
        self,
        args: Mapping[str, object] | ToolArgs,
        timeout_s: float,
        context: ToolContext | None = None,
    ) -> object:
        """Run the callable once with `args` as keyword arguments and return its raw
        result; its exceptions propagate untouched (they are classified at the edge).
        An async callable is awaited, a sync one runs in a worker thread. Past
        `timeout_s` this raises PythonToolTimeout (a TimeoutError); a sync callable's
        thread cannot be stopped and finishes in the background, its result discarded."""
        kwargs = self.arguments(args) if isinstance(args, ToolArgs) else dict(args)
        if self.context_param is not None:
            kwargs[self.context_param] = context or ToolContext.for_truth(0, self.name)
        # asyncio.timeout rather than wait_for: it tells its own expiry apart from a
        # TimeoutError the tool raised (aiohttp's ServerTimeoutError is one), which must
        # reach the edge with its own type, and from a cancellation of the caller.
        deadline = asyncio.timeout(timeout_s)
        try:
            # the user's code: not the trial timeout's to count, within its own timeout
            # (one that will not be cancelled is not waited for past it)
            with outside_call(timeout_s):
                async with deadline:
                    return await self._run(kwargs)
        except TimeoutError:
            if not deadline.expired():
                raise
            raise PythonToolTimeout(
                f"TimeoutError: {self.name} did not return within {timeout_s:g}s",
                waited_s=timeout_s,
            ) from None

    async def _run(self, kwargs: dict[str, object]) -> object:
        if self.is_async:
            result = await self.fn(**kwargs)  # type: ignore[misc]
        else:
            result = await in_daemon_thread(self.fn, **kwargs)
        if inspect.isawaitable(result):  # a sync wrapper that returned a coroutine
            result = await result
        return result
