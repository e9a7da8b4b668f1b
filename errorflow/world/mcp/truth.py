"""An MCP tool's ground truth: its answer, fault-free, for a need's arguments (unless
the need states it with `expect:`), as a Python tool's is its function's answer."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import JsonValue, ValidationError

from errorflow.core.taxonomy import ErrorCode
from errorflow.core.tool_errors import JsonRpcError, ToolServerDown
from errorflow.policies.rpc_errors import classify_rpc
from errorflow.scenario.problems import Problem, ScenarioError
from errorflow.scenario.spec.model import NeedSpec, Scenario
from errorflow.world.mcp.tool import McpTool

#: How long one ground-truth call may take (seconds).
TRUTH_TIMEOUT_S = 30.0
#: Calls of a tool whose server fails them as passing trouble (its handler failed,
#: -32603; its own deadline, -32001) before its truth is given up on: a flaky server
#: answers in the end, as a flaky Python tool does (errorflow/world/ground_truth.py).
TRUTH_TRIES = 5
PASSING = frozenset({ErrorCode.TRANSIENT, ErrorCode.TIMEOUT})


def mcp_answer(
    scenario: Scenario, tool: McpTool, need: NeedSpec, args: Mapping[str, object]
) -> JsonValue:
    """What the tool answers for `args`: None when the arguments are not valid ones or
    the server says there is no such thing (-32002). A call the server fails as passing
    trouble is made again, up to `TRUTH_TRIES` calls. A server that is gone raises
    ToolServerDown; any other failure is a ScenarioError asking for `expect:`."""
    try:
        given = tool.args_model.model_validate(dict(args))
    except ValidationError:
        return None  # the right arguments are not valid ones: nothing to find
    error: Exception | None = None
    for _ in range(TRUTH_TRIES):
        try:
            return tool.call_sync(given, TRUTH_TIMEOUT_S)
        except ToolServerDown:
            raise
        except JsonRpcError as exc:
            code = classify_rpc(exc.code)
            if code is ErrorCode.NOT_FOUND:
                return None
            error = exc
            if code not in PASSING:
                break
        except Exception as exc:
            error = exc
            break
    assert error is not None
    index = scenario.task.needs.index(need)
    text = " ".join(f"{type(error).__name__}: {error}".split())[:300]
    message = (
        f"the ground truth of need {need.id!r} could not be computed: MCP tool "
        f"{tool.remote!r} answered {text} for the need's arguments; state the answer "
        "with `expect:`"
    )
    raise ScenarioError("<scenario>", [Problem(f"task.needs.{index}", None, None, message)])
