"""A python agent's code (`behaviour: python`, `function: module:callable`): loading it
and checking that it can be an agent (an async callable of one argument).

Here, below the agents, for the same reason as Python tools (errorflow.scenario.python_ref):
validation imports the code to say, in one line naming the agent and the reference,
what is wrong with it; the agents run it (errorflow.agents.own).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

from errorflow.scenario.python_ref import PythonToolError, load_callable

#: What a python agent is: called with its context, awaited for its reply.
AgentCallable = Callable[[object], Awaitable[object]]


class PythonAgentError(PythonToolError):
    """A python agent's callable cannot be loaded or cannot be an agent (one line)."""


def load_agent_callable(agent: str, ref: str) -> AgentCallable:
    """The async callable `ref` names, for the agent `agent`."""
    try:
        fn = load_callable(ref, what=f"python agent {agent!r}: function")
    except PythonAgentError:
        raise
    except PythonToolError as exc:
        text = str(exc)
        if not text.startswith("python agent"):
            text = f"python agent {agent!r}: {text}"
        raise PythonAgentError(text) from None
    call = getattr(fn, "__call__", None)  # noqa: B004  (an instance with an async __call__)
    if not (inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)):
        raise PythonAgentError(
            f"python agent {agent!r}: {ref!r} is not async (write `async def`: "
            "errorflow awaits it with the agent's context)"
        )
    try:
        inspect.signature(fn).bind(object())
    except TypeError:
        raise PythonAgentError(
            f"python agent {agent!r}: {ref!r} must take one argument (the agent's context)"
        ) from None
    except ValueError:  # no signature to read (a builtin): it is called and judged then
        pass
    return fn  # type: ignore[return-value]
