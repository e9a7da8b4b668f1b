"""The tool world: the facts, the tools that serve them, and the faults injected into them.

The world knows the ground truth (`truth`), so the scorer can tell a true claim from a
fabricated one. One `ToolClient` exists per (trial, agent): its fault counters and
random stream belong to that agent's view of the tools, which keeps every trial
reproducible from the seed even when agents run in separate processes.

What a tool kind *is* (its argument schema and description) is defined in
errorflow.scenario.spec.catalog, where the loader checks scenarios against it; this module
implements what the kinds do.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypedDict

from pydantic import ValidationError

from errorflow.core.seeding import stream
from errorflow.core.tool_context import ToolContext
from errorflow.core.tool_errors import (
    CallTimeout,
    ConnectTimeout,
    HTTPStatusError,
    SchemaViolation,
    ToolException,
    UnknownTool,
    UnknownValue,
)
from errorflow.faults import tool_answers
from errorflow.faults.tool_base import (
    Answered,
    Call,
    Failure,
    FaultPlan,
    Instead,
    ToolFaultBase,
    plan_for,
    withheld,
)
from errorflow.scenario.spec.catalog import (
    FetchManyArgs,
    QueryMetricArgs,
    SearchPapersArgs,
    SendReportArgs,
    ToolArgs,
)
from errorflow.scenario.spec.model import (
    NeedSpec,
    Scenario,
    ToolSpec,
    WorldSpec,
)
from errorflow.scenario.spec.run_time import arrival
from errorflow.scenario.spec.tool_args import enum_options
from errorflow.world import records
from errorflow.world.other_entities import other_calls
from errorflow.world.python_tool import business_error
from errorflow.world.services import Admission, ServiceRegistry
from errorflow.world.tool_answer import json_answer
from errorflow.world.tool_catalog import ToolCatalog

# -- outcomes --------------------------------------------------------------------


@dataclass
class ToolResult:
    """What a tool returned when it did not raise: the body and how long it took."""

    value: Any
    duration_s: float
    business_error: str | None = None  # HTTP 200 with success: false
    empty: bool = False
    item_errors: dict[str, str] = field(default_factory=dict)  # partial success


class SendReceipt(TypedDict):
    """What the report sink answers to a send."""

    sent: bool
    title: str


class SentReport(TypedDict):
    """One report the sink really sent, and the idempotency key it came with."""

    title: str
    key: str | None


# -- ground truth ----------------------------------------------------------------


def truth(world: WorldSpec, tools: dict[str, ToolSpec], need: NeedSpec) -> Any:
    """The value a correct answer to `need` contains."""
    kind = tools[need.tool].kind
    if kind == "metric_store":
        return world.metrics.get(str(need.value))
    if kind == "paper_search":
        return _search(world, str(need.value))
    if kind == "batch_fetch":
        ids = need.value if isinstance(need.value, list) else [str(need.value)]
        return {i: world.documents.get(i) for i in ids}
    return None


def _search(world: WorldSpec, query: str) -> list[str]:
    q = query.lower().strip()
    return sorted(
        p.id for p in world.papers if q and (q in p.topic.lower() or q in p.title.lower())
    )


#: The places of the faults that fired on one tool-gate call's attempts (set by the gate
#: for each call: a python agent's calls at once are tasks of their own, each with its
#: own list, so each call's event names its own faults).
CALL_FIRED: ContextVar[list[str] | None] = ContextVar("errorflow_call_fired", default=None)


class ToolClient:
    """One agent's connection to the tool world within one trial."""

    def __init__(
        self,
        scenario: Scenario,
        trial: int,
        agent: str,
        catalog: ToolCatalog | None = None,
        services: ServiceRegistry | None = None,
    ) -> None:
        self.catalog = catalog if catalog is not None else ToolCatalog.of(scenario)
        self.services = services
        self._scenario = scenario
        self.trial = trial
        self.agent = agent
        self.world = scenario.world
        self.tools = scenario.tools
        self.seed = scenario.seed
        self._plans: dict[str, FaultPlan] = {}
        self._malform: dict[str, FaultPlan] = {}
        # Where each plan's faults are in the tool's `faults` list, to name them.
        self._places: dict[tuple[str, str], list[int]] = {}
        #: The place in the scenario of every injected fault that fired, in call order
        #: (`tools.kpi.faults[0]`); the tool gate reads what a call added.
        self.fired: list[str] = []
        #: The places of the faults that answer wrong but succeed (stale, wrong_entity,
        #: corrupt): a trace names such a fault as where a false claim started.
        self.silent_places: frozenset[str] = frozenset(
            f"tools.{name}.faults[{i}]"
            for name, spec in self.tools.items()
            for i, fault in enumerate(spec.faults)
            if fault.silent
        )
        # Degraded-service draws, one stream for this agent's view of the services.
        self._rng_service: random.Random | None = None  # drawn only by a service's calls
        # Per-item draws (partial faults), one stream per tool, made when first drawn
        # from (seeding one costs microseconds, and most agents never draw).
        self._rng_items: dict[str, random.Random] = {}
        self._sent: dict[str, SendReceipt] = {}  # idempotency key -> first result
        self._python_calls: dict[str, int] = {}  # a Python tool's calls so far (ToolContext)
        self.sent_reports: list[SentReport] = []
        for name, spec in self.tools.items():
            for stage in ("call", "args"):
                plan, places = plan_for(spec.faults, stage, scenario.seed, trial, agent, name)
                (self._plans if stage == "call" else self._malform)[name] = plan
                self._places[name, stage] = places

    def _silently(self, tool: str, fault: ToolFaultBase, value: Any, wrong: Any) -> Any:
        """`wrong`, the answer a silent fault made of `value`, and the fault noted as fired
        only if it changed it: one that left the answer as it was (a `corrupt` of digits
        in a value with none, no older value to be `stale`) struck nothing."""
        if wrong != value:
            self._note(tool, "call", self._plans[tool].position(fault))
        return wrong

    def _note(self, tool: str, stage: str, position: int | None) -> None:
        """Record that the fault at `position` of a plan fired, by its scenario place:
        for the trial, and for the gate's call that made it (`CALL_FIRED`)."""
        if position is not None:
            place = f"tools.{tool}.faults[{self._places[tool, stage][position]}]"
            self.fired.append(place)
            mine = CALL_FIRED.get()
            if mine is not None:
                mine.append(place)

    def _items_rng(self, tool: str) -> random.Random:
        rng = self._rng_items.get(tool)
        if rng is None:
            rng = self._rng_items[tool] = stream(self.seed, self.trial, self.agent, tool, "items")
        return rng

    def mangle(self, tool: str, args: Mapping[str, object]) -> dict[str, object] | str:
        """The model's call as it arrives: a `malformed_call` fault may mangle it."""
        plan = self._malform.get(tool)
        fault = plan.next() if plan else None
        if fault is None or plan is None:
            return dict(args)
        self._note(tool, "args", plan.fired)
        model = self.catalog.models[tool]
        return fault.mangle(args, [n for n, f in model.model_fields.items() if f.is_required()])

    def validate(self, tool: str, args: Mapping[str, object] | str) -> ToolArgs:
        """Pre-flight: check the call against the tool's schema before it runs."""
        if tool not in self.tools:
            raise UnknownTool(f"Error: no tool named '{tool}'", options=sorted(self.tools))
        model = self.catalog.models[tool]
        spec = self.tools[tool]
        payload = _parse_arguments(args, spec) if isinstance(args, str) else dict(args)
        if not isinstance(payload, dict):
            raise SchemaViolation(
                "TypeError: arguments must be an object",
                field="(arguments)",
                constraint="a JSON object",
                received=payload,
            )
        try:
            return model.model_validate(payload)
        except ValidationError as exc:
            raise _schema_violation(tool, model, exc, spec) from None

    def invoke(
        self,
        tool: str,
        args: ToolArgs,
        *,
        timeout_s: float,
        idempotency_key: str | None,
        now: float = 0.0,
    ) -> ToolResult:
        """Run a tool once (at run time `now`). Raises a ToolException on failure, like
        a client library."""
        spec = self.tools[tool]
        before = self._before(tool, args, timeout_s, idempotency_key, now)
        if isinstance(before, ToolResult):
            return before
        fault, latency = before
        value, item_errors = self._serve(tool, args, fault)
        if fault is not None and fault.silent:
            value = self._silently(tool, fault, value, self._silent(tool, args, fault, value))
        if spec.kind == "report_sink":
            value = self._send(args, idempotency_key)
        empty = value in ([], {}, None) and spec.kind != "report_sink"
        return ToolResult(value, latency, empty=empty, item_errors=item_errors)

    async def ainvoke(
        self,
        tool: str,
        args: ToolArgs,
        *,
        timeout_s: float,
        idempotency_key: str | None,
        now: float = 0.0,
    ) -> ToolResult:
        """`invoke` for every kind: a Python tool's code is awaited, an MCP tool's server
        called (their own exceptions propagate, to be classified at the tool edge)."""
        spec = self.tools[tool]
        if spec.kind not in ("python", "mcp"):
            return self.invoke(
                tool, args, timeout_s=timeout_s, idempotency_key=idempotency_key, now=now
            )
        before = self._before(tool, args, timeout_s, idempotency_key, now)
        if isinstance(before, ToolResult):
            return before
        fault, latency = before
        value = await self._python(tool, args, timeout_s)
        if fault is not None and fault.silent:
            wrong = await self._python_silent(tool, args, fault, value, timeout_s)
            value = self._silently(tool, fault, value, wrong)
        refused = business_error(spec.business_failure, value) if spec.business_failure else None
        return ToolResult(value, latency, business_error=refused, empty=value in ([], {}, None, ""))

    def _before(
        self,
        tool: str,
        args: ToolArgs,
        timeout_s: float,
        idempotency_key: str | None,
        now: float = 0.0,
    ) -> ToolResult | tuple[ToolFaultBase | None, float]:
        """The injected faults' turn, before the tool itself: a raised failure, a result
        the fault makes up (a refusal, an empty answer, a deduplicated send), or the
        fault left for the tool to apply (partial, silent) and the call's latency."""
        spec = self.tools[tool]
        if spec.kind == "report_sink" and idempotency_key and idempotency_key in self._sent:
            # Deduplicated on the key: the retried send is not sent twice.
            return ToolResult(self._sent[idempotency_key], spec.latency_s)
        fault = self._plans[tool].next()
        if fault is not None and not fault.silent:  # a silent one is noted once applied
            self._note(tool, "call", self._plans[tool].fired)
        latency = spec.latency_s
        before = fault.before(Call(tool, spec.kind, timeout_s)) if fault is not None else None
        if isinstance(before, Answered):
            latency, fault = before.latency_s, None  # slow, but answered within the timeout
        elif isinstance(before, Failure):
            if before.served and spec.kind == "report_sink":
                self._send(args, idempotency_key)  # the report went out all the same
            error = before.error
            try:
                raise error
            finally:  # this frame lets go of the error its traceback holds: no cycle
                del error, before
        elif isinstance(before, Instead):
            return ToolResult(
                before.value, latency, business_error=before.business_error, empty=before.empty
            )
        service = self.services.get(spec.service) if self.services is not None else None
        if service is not None:
            if self._rng_service is None:
                self._rng_service = stream(self.seed, self.trial, self.agent, "services")
            floor = arrival(self._scenario, self.trial)
            admission = service.admit(
                self.trial, self.agent, now, latency, self._rng_service, floor=floor
            )
            latency = self._raise_for_service(admission, tool, timeout_s)
        return fault, latency

    # -- silent wrong answers (errorflow.faults.tool) ---------------------------------
    def _silent(self, tool: str, args: ToolArgs, fault: ToolFaultBase, value: Any) -> Any:
        """The right answer made wrong by a silent fault that fired on this call."""
        rng = self._plans[tool].pick()
        if not fault.another_entity:
            return fault.after(value, rng)
        for call in other_calls(self._scenario, tool, args.model_dump(), rng):
            try:
                other, _ = self._serve(tool, self.validate(tool, call), None)
            except ToolException:
                continue
            if other not in (None, [], {}, "") and other != value:
                batch = self._is_batch(tool, args)
                return tool_answers.relabelled(other, value) if batch else other
        return value

    async def _python_silent(
        self, tool: str, args: ToolArgs, fault: ToolFaultBase, value: Any, timeout_s: float
    ) -> Any:
        """`_silent` for a Python tool: another entity's answer is its code's answer."""
        rng = self._plans[tool].pick()
        if not fault.another_entity:
            return fault.after(value, rng)
        options = enum_options(self.catalog.models[tool])
        for call in other_calls(self._scenario, tool, args.model_dump(), rng, options):
            try:
                other = await self._python(tool, self.validate(tool, call), timeout_s)
            except Exception:  # another entity's call failing is no answer to give
                continue
            if other not in (None, [], {}, "") and other != value:
                return other
        return value

    async def _python(self, tool: str, args: ToolArgs, timeout_s: float) -> Any:
        if tool in self.catalog.mcp:
            return await self.catalog.mcp[tool].call(args, timeout_s)
        call = self._python_calls[tool] = self._python_calls.get(tool, -1) + 1
        context = ToolContext.of(self.seed, self.trial, self.agent, tool, call)
        raw = await self.catalog.python[tool].call(args, timeout_s, context)
        return json_answer(tool, raw)

    def _is_batch(self, tool: str, args: ToolArgs) -> bool:
        """Whether the answer is per item (keyed by the items asked for)."""
        if isinstance(args, FetchManyArgs):
            return True
        listed = any(isinstance(v, list) for v in args.model_dump().values())
        return listed and self.tools[tool].kind == "lookup"

    def _raise_for_service(self, admission: Admission, tool: str, timeout_s: float) -> float:
        """The service's answer as a client library raises it; the latency when it took
        the call."""
        host = f"{self.tools[tool].service}.internal"
        status = admission.status
        if admission.verdict in ("ok", "degraded") and admission.latency_s > timeout_s:
            # The client gives up; the service goes on working on the call (its ledger
            # keeps it busy until the call would have ended): a retry adds load.
            raise CallTimeout(
                f"TimeoutError: {tool} did not answer within {timeout_s:g}s ({host} loaded)",
                waited_s=timeout_s,
            )
        if admission.verdict == "ok":
            return admission.latency_s
        if status == "connect_timeout":
            raise ConnectTimeout(f"Error: connect ETIMEDOUT {host}:443 (service down)")
        if admission.verdict == "rate_limited":
            ra = admission.retry_after_s or 0.0
            raise HTTPStatusError(429, f"HTTP 429 Too Many Requests (Retry-After: {ra:g})", ra)
        code = int(status or 503)
        raise HTTPStatusError(
            code, f"HTTP {code} Service Unavailable ({host}: {admission.verdict})"
        )

    def _send(self, args: ToolArgs, idempotency_key: str | None) -> SendReceipt:
        """The report_sink side effect: one entry in `sent_reports` per send."""
        assert isinstance(args, SendReportArgs)
        value = SendReceipt(sent=True, title=args.title)
        self.sent_reports.append(SentReport(title=args.title, key=idempotency_key))
        if idempotency_key:
            self._sent[idempotency_key] = value
        return value

    def _serve(
        self, tool: str, args: ToolArgs, fault: ToolFaultBase | None
    ) -> tuple[Any, dict[str, str]]:
        if isinstance(args, QueryMetricArgs):
            if args.name not in self.world.metrics:
                raise UnknownValue(
                    f"Error: ENOENT: no such metric, open '{args.name}'",
                    field="name",
                    received=args.name,
                    options=sorted(self.world.metrics),
                )
            return self.world.metrics[args.name], {}
        if isinstance(args, SearchPapersArgs):
            ids = _search(self.world, args.query)[: args.limit]
            return ids, {}
        item_p = fault.item_failure_p if fault is not None else None
        if isinstance(args, FetchManyArgs):
            out: dict[str, str] = {}
            errors: dict[str, str] = {}
            for doc_id in args.ids:
                if item_p is not None and self._items_rng(tool).random() < item_p:
                    errors[doc_id] = "HTTP 503 Service Unavailable"
                elif doc_id not in self.world.documents:
                    errors[doc_id] = "HTTP 404 Not Found"
                else:
                    out[doc_id] = self.world.documents[doc_id]
            return out, errors
        if isinstance(args, SendReportArgs):
            return {"sent": True, "title": args.title}, {}
        spec = self.tools[tool]
        if spec.kind in ("lookup", "search") and spec.table is not None:
            table = self.world.tables[spec.table]
            given = args.model_dump()
            if spec.kind == "search":
                return records.search(spec, table, given), {}
            value, errors = records.lookup(spec, table, given)
            if item_p is not None and isinstance(value, dict):
                for item in sorted(value):
                    if self._items_rng(tool).random() < item_p:
                        del value[item]
                        errors[item] = "HTTP 503 Service Unavailable"
            return value, errors
        raise AssertionError(f"no handler for {type(args).__name__}")


def _parse_arguments(text: str, spec: ToolSpec) -> object:
    """A call's arguments as the model sent them: JSON text, perhaps cut off (worded as
    the host that parses them would: Python's for Python and MCP tools, which errorflow
    calls, a JavaScript client's for the built-in kinds)."""
    try:
        payload: object = json.loads(text)
    except json.JSONDecodeError as exc:
        raw = (
            f"SyntaxError: Unexpected end of JSON input at position {exc.pos}"
            if spec.kind not in ("python", "mcp")
            else f"JSONDecodeError: {exc}"
        )
        raise SchemaViolation(
            raw,
            field="(arguments)",
            constraint="a complete JSON object",
            received=text[:80],
        ) from None
    return payload


def _schema_violation(
    tool: str, model: type[ToolArgs], exc: ValidationError, spec: ToolSpec
) -> SchemaViolation:
    """The first schema error of a call, raised the way the tool's own runtime words it:
    Python's TypeError for a Python tool, a JSON Schema check's for an MCP tool (its
    arguments are checked against the server's `inputSchema` before they are sent), a
    JavaScript client's for the built-in kinds."""
    err = exc.errors()[0]
    fld = ".".join(str(p) for p in err["loc"]) or "(arguments)"
    missing = err["type"] == "missing"
    unexpected = err["type"] == "extra_forbidden"
    func = (spec.function or tool).rsplit(":", 1)[-1]
    if missing:
        raw = {
            "python": f"TypeError: {func}() missing 1 required positional argument: '{fld}'",
            "mcp": f"Invalid arguments for tool {tool}: '{fld}' is a required property",
        }.get(spec.kind, f"TypeError: Cannot read properties of undefined (reading '{fld}')")
        constraint = "required"
    elif unexpected:
        raw = {
            "python": f"TypeError: {func}() got an unexpected keyword argument '{fld}'",
            "mcp": (
                f"Invalid arguments for tool {tool}: additional properties are not allowed "
                f"('{fld}' was unexpected)"
            ),
        }.get(spec.kind, f"TypeError: unexpected keyword argument '{fld}'")
        constraint = f"not a parameter of {tool}; allowed: {', '.join(model.model_fields)}"
    else:
        raw = (
            f"Invalid arguments for tool {tool}: {fld}: {err['msg']}"
            if spec.kind == "mcp"
            else f"TypeError: {fld}: {err['msg']}"
        )
        constraint = err["msg"]
    return SchemaViolation(
        raw,
        field=fld,
        constraint=constraint,
        received=None if missing else err.get("input"),
        missing=missing,
        options=list(model.model_fields) if unexpected else None,
        unexpected=unexpected,
    )


def hidden_identifier(scenario: Scenario, trial: int, need: NeedSpec) -> bool:
    """Is the real identifier of `need` withheld from the model in this trial (a
    `bad_args` fault on the need's tool: errorflow.faults.tool)?"""
    return withheld(scenario.tools[need.tool].faults, scenario.seed, trial, need.id) is not None
