"""The one interface every model backend implements, and the conversation it reads.

The agent loop builds a `ModelRequest` (the conversation so far as typed turns, the
tool list) and gets back either tool calls or a final answer, plus usage. Turns carry
structured data so the simulated model can read them exactly; the Anthropic backend
renders the same turns as text and content blocks. The loop never knows which
backend it talks to.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from pydantic import JsonValue

from errorflow.core.errors import ErrorflowError
from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol.claims import FinalAnswer
from errorflow.protocol.envelope import JsonObject

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}([T ][\d:.+Z-]+)?")


@dataclass(frozen=True)
class ToolDef:
    name: str
    description: str
    input_schema: JsonObject  # a JSON Schema
    #: The tool delivers the agent's output (a report sink) rather than fetching facts.
    delivers: bool = False

    @cached_property
    def schema_chars(self) -> int:
        """The length of `input_schema` as JSON text (what a prompt spends on it), worked
        out once: a tool is offered on every model call."""
        return len(json.dumps(self.input_schema))


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    #: Whatever JSON object the model sent; a str is an unparseable (truncated) call.
    arguments: JsonObject | str


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class NeedView:
    """A need as the model sees it: the identifier only when the task gives it."""

    id: str
    tool: str
    arg: str
    wording: str
    identifier: JsonValue
    #: Simulator only, never rendered to a real model: the value a model that reads the
    #: wording would recognise among listed options (it "knows" 营收 means revenue).
    meant: JsonValue = None
    #: The call's other arguments, as the task states them.
    fixed: Mapping[str, JsonValue] = field(default_factory=dict)
    #: Arguments taken from another need's value: argument -> (need id, field or None).
    depends: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)
    #: Simulator only: the kind of value the answer is (`number`, `string`, `date`,
    #: `boolean`, `list`, `object`), as a model knows from the wording what it asks for;
    #: an invented answer has this shape. None: unknown.
    shape: str | None = None
    #: Other tools that serve the same fact with the same arguments: an agent that
    #: checks a claim may check it with one of them.
    sources: tuple[str, ...] = ()


def shape_of(value: object) -> str | None:
    """The kind of answer `value` is, for `NeedView.shape`."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "date" if _DATE.fullmatch(value) else "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return None


@dataclass(frozen=True)
class TaskTurn:
    prompt: str
    needs: list[NeedView]


@dataclass(frozen=True)
class UpstreamTurn:
    """A message from another agent, as far as the envelope shows it."""

    sender: str
    status: str
    confidence: float
    errors: list[JsonObject]  # the envelope's errors, in their wire form
    answer: FinalAnswer


@dataclass(frozen=True)
class AssistantTurn:
    calls: list[ToolCall]
    text: str = ""


@dataclass(frozen=True)
class ObservationTurn:
    call_id: str
    tool: str
    content: Mapping[str, JsonValue]  # the model-facing observation (already redacted)

    @property
    def is_error(self) -> bool:
        return not self.content.get("ok", False)


Turn = TaskTurn | UpstreamTurn | AssistantTurn | ObservationTurn


@dataclass(frozen=True)
class Inspection:
    """An inspector's brief (errorflow.scenario.spec.defence_model.InspectorSpec)."""

    check: float = 1.0
    on_wrong: str = "correct"
    genealogy: bool = False


@dataclass(frozen=True)
class Stance:
    """How the agent treats what it receives: the defences it runs and, in a
    discussion round, that it revises its own answer (the upstream turn sent by itself)
    in the light of its peers'. `own_evidence`: what its own tools said, by claim key."""

    challenge: float = 0.0
    inspect: Inspection | None = None
    deliberate: bool = False
    own_evidence: Mapping[str, JsonValue] = field(default_factory=dict)


@dataclass
class ModelRequest:
    agent: str
    role: str
    system: str
    turns: list[Turn]
    tools: list[ToolDef]
    #: What the agent does (errorflow.scenario.spec.behaviour): gather, synthesise, check, route
    #: (None: the preset of `role`).
    behaviour: str | None = None
    stance: Stance = field(default_factory=Stance)


@dataclass
class ModelResponse:
    calls: list[ToolCall] = field(default_factory=list)
    final: FinalAnswer | None = None
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = "end_turn"


class ModelCallError(ErrorflowError):
    """A model call that failed (429, 529, 5xx, timeout, or an unusable answer).

    `infrastructure` is set when the failure is errorflow's infrastructure rather than
    the experiment (the server cannot be reached, refuses the key, has no such model):
    one line naming the server and what failed. The code still decides retries; only a
    call that fails for good this way makes the trial an infra fault. `timed_out`: the
    server did not answer in the request's time (it may still be working on it)."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        status: int | None = None,
        retry_after_s: float | None = None,
        infrastructure: str | None = None,
        timed_out: bool = False,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.retry_after_s = retry_after_s
        self.infrastructure = infrastructure
        self.timed_out = timed_out


class InfrastructureError(ErrorflowError):
    """A real model backend failed its check before the first trial (unreachable, key
    refused, no such model): the run cannot measure anything and does not start. The
    message is one line naming the server; it never holds the API key."""


class ModelBackend(Protocol):
    async def complete(self, request: ModelRequest) -> ModelResponse: ...
