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
from dataclasses import dataclass, field
from typing import Any, TypedDict

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

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
from errorflow.scenario.fault_model import SILENT_KINDS
from errorflow.scenario.spec.catalog import (
    FetchManyArgs,
    QueryMetricArgs,
    SearchPapersArgs,
    SendReportArgs,
    ToolArgs,
)
from errorflow.scenario.spec.model import (
    FaultSpec,
    NeedSpec,
    Scenario,
    ToolSpec,
    WorldSpec,
)
from errorflow.scenario.spec.run_time import arrival
from errorflow.scenario.spec.tool_args import enum_options
from errorflow.world import records
from errorflow.world import silent_faults as silent
from errorflow.world.python_tool import business_error
from errorflow.world.services import Admission, ServiceRegistry
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


# -- fault plan ------------------------------------------------------------------


class FaultPlan:
    """Decides, call by call, which injected fault (if any) fires on a tool.

    Each fault has its own random stream, derived from `rng` and the fault's position,
    and draws one number on every call whether it fires or not. So the hit pattern of
    a fault depends only on (seed, trial, agent, tool, position): adding a fault to
    another tool, or appending one to this tool, never shifts it."""

    def __init__(self, faults: list[FaultSpec], rng: random.Random | None) -> None:
        """`rng` may be None for a tool without faults (nothing ever draws from it)."""
        self._faults = faults
        self._rngs: list[random.Random] = []
        self._base = 0
        if faults:
            if rng is None:
                raise ValueError("a fault plan with faults needs its random stream")
            self._base = rng.getrandbits(64)
            self._rngs = [random.Random(f"{self._base}:{i}") for i in range(len(faults))]
        self._picks: dict[int, random.Random] = {}
        self.calls = 0
        #: The position (in this plan's faults) of the fault that fired on the last call.
        self.fired: int | None = None

    def next(self, kinds: frozenset[str] | None = None) -> FaultSpec | None:
        """Advance the call counter and return the first fault that fires (among
        `kinds`, when given). Every fault draws, fired, shadowed or filtered out."""
        index = self.calls
        self.calls += 1
        fired: FaultSpec | None = None
        self.fired = None
        for position, (fault, rng) in enumerate(zip(self._faults, self._rngs, strict=True)):
            draw = rng.random()
            if kinds is not None and fault.kind not in kinds:
                continue
            if fault.first_n is not None:
                hit = index < fault.first_n
            elif fault.p is not None:
                hit = draw < fault.p
            else:
                hit = True
            if hit and fired is None:
                fired, self.fired = fault, position
        return fired

    def pick(self) -> random.Random:
        """The stream of the choices the last fault that fired makes (which other
        entity, which digits): a stream of its own, so what it picks never moves the
        draws that decide whether a fault fires."""
        assert self.fired is not None
        rng = self._picks.get(self.fired)
        if rng is None:
            rng = self._picks[self.fired] = random.Random(f"{self._base}:{self.fired}:pick")
        return rng


CALL_FAULTS = frozenset(
    {
        "transient",
        "timeout",
        "rate_limit",
        "permission",
        "not_found",
        "business_rule",
        "empty",
        "partial",
        *SILENT_KINDS,
    }
)


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
        # Degraded-service draws, one stream for this agent's view of the services.
        self._rng_service: random.Random | None = None  # drawn only by a service's calls
        # Per-item draws (partial faults), one stream per tool, made when first drawn
        # from (seeding one costs microseconds, and most agents never draw).
        self._rng_items: dict[str, random.Random] = {}
        self._sent: dict[str, SendReceipt] = {}  # idempotency key -> first result
        self._python_calls: dict[str, int] = {}  # a Python tool's calls so far (ToolContext)
        self.sent_reports: list[SentReport] = []
        # A stream is seeded only for a tool with faults of that kind (seeding costs
        # microseconds, per agent, tool and trial; the draws are the same either way).
        for name, spec in self.tools.items():
            call_faults = [f for f in spec.faults if f.kind in CALL_FAULTS]
            rng = stream(scenario.seed, trial, agent, name) if call_faults else None
            self._plans[name] = FaultPlan(call_faults, rng)
            bad = [f for f in spec.faults if f.kind == "malformed_call"]
            rng = stream(scenario.seed, trial, agent, name, "mal") if bad else None
            self._malform[name] = FaultPlan(bad, rng)
            for plan, kinds in (("call", CALL_FAULTS), ("mal", {"malformed_call"})):
                places = [i for i, f in enumerate(spec.faults) if f.kind in kinds]
                self._places[name, plan] = places

    def _note(self, tool: str, plan: str, position: int | None) -> None:
        """Record that the fault at `position` of a plan fired, by its scenario place."""
        if position is not None:
            self.fired.append(f"tools.{tool}.faults[{self._places[tool, plan][position]}]")

    def _items_rng(self, tool: str) -> random.Random:
        rng = self._rng_items.get(tool)
        if rng is None:
            rng = self._rng_items[tool] = stream(self.seed, self.trial, self.agent, tool, "items")
        return rng

    # The model's call as it arrives may be mangled (malformed_call): the JSON is
    # truncated, a field dropped, a type changed or an extra field added.
    def mangle(self, tool: str, args: Mapping[str, object]) -> dict[str, object] | str:
        plan = self._malform.get(tool)
        fault = plan.next() if plan else None
        if fault is None or plan is None:
            return dict(args)
        self._note(tool, "mal", plan.fired)
        # Drop or retype a field the schema requires (an optional one would not fail).
        required = [n for n, f in self.catalog.models[tool].model_fields.items() if f.is_required()]
        first = next((k for k in args if k in required), next(iter(args), None))
        if fault.mode == "truncated_json" or fault.mode is None:
            text = json.dumps(dict(args), ensure_ascii=False)
            return text[: max(1, len(text) // 2)]
        mangled = dict(args)
        if fault.mode == "missing_field" and first is not None:
            mangled.pop(first)
        elif fault.mode == "wrong_type" and first is not None:
            mangled[first] = 12345 if isinstance(mangled[first], str) else "12345"
        elif fault.mode == "extra_field":
            mangled["verbose"] = True
        return mangled

    def validate(self, tool: str, args: Mapping[str, object] | str) -> ToolArgs:
        """Pre-flight: check the call against the tool's schema before it runs."""
        if tool not in self.tools:
            raise UnknownTool(f"Error: no tool named '{tool}'", options=sorted(self.tools))
        model = self.catalog.models[tool]
        payload = _parse_arguments(args) if isinstance(args, str) else dict(args)
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
            raise _schema_violation(tool, model, exc, self.tools[tool]) from None

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
        if fault is not None and fault.kind in SILENT_KINDS:
            value = self._silent(tool, args, fault, value)
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
        """`invoke` for every kind: a Python tool's code is awaited (its own exceptions
        propagate, to be classified like any client library's)."""
        spec = self.tools[tool]
        if spec.kind != "python":
            return self.invoke(
                tool, args, timeout_s=timeout_s, idempotency_key=idempotency_key, now=now
            )
        before = self._before(tool, args, timeout_s, idempotency_key, now)
        if isinstance(before, ToolResult):
            return before
        fault, latency = before
        value = await self._python(tool, args, timeout_s)
        if fault is not None and fault.kind in SILENT_KINDS:
            value = await self._python_silent(tool, args, fault, value, timeout_s)
        refused = business_error(spec.business_failure, value) if spec.business_failure else None
        return ToolResult(value, latency, business_error=refused, empty=value in ([], {}, None, ""))

    def _before(
        self,
        tool: str,
        args: ToolArgs,
        timeout_s: float,
        idempotency_key: str | None,
        now: float = 0.0,
    ) -> ToolResult | tuple[FaultSpec | None, float]:
        """The injected faults' turn, before the tool itself: a raised failure, a result
        the fault makes up (a refusal, an empty answer, a deduplicated send), or the
        fault left for the tool to apply (partial) and the call's latency."""
        spec = self.tools[tool]
        if spec.kind == "report_sink" and idempotency_key and idempotency_key in self._sent:
            # Deduplicated on the key: the retried send is not sent twice.
            return ToolResult(self._sent[idempotency_key], spec.latency_s)
        fault = self._plans[tool].next()
        self._note(tool, "call", self._plans[tool].fired)
        latency = spec.latency_s
        if fault is not None and fault.kind == "timeout":
            if fault.duration_s is not None and fault.duration_s < timeout_s:
                latency = fault.duration_s  # slow, but answered within the timeout
                fault = None
            elif spec.kind == "report_sink":
                # The client gave up, the server did not: the report went out, and a
                # retry without an idempotency key sends it a second time.
                self._send(args, idempotency_key)
        if fault is not None:
            self._raise_for(fault, tool, args, timeout_s)
            if fault.kind == "business_rule":
                reason = fault.reason or "request rejected by business rule"
                return ToolResult(
                    {"success": False, "reason": reason}, latency, business_error=reason
                )
            if fault.kind == "empty":
                return ToolResult(empty_of(spec.kind), latency, empty=True)
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

    # -- silent wrong answers (errorflow.world.silent_faults) -----------------------
    def _silent(self, tool: str, args: ToolArgs, fault: FaultSpec, value: Any) -> Any:
        """The right answer made wrong by a silent fault that fired on this call."""
        rng = self._plans[tool].pick()
        if fault.kind != "wrong_entity":
            return (
                silent.stale(value, fault)
                if fault.kind == "stale"
                else silent.corrupt(value, fault, rng)
            )
        for call in silent.other_calls(self._scenario, tool, args.model_dump(), rng):
            try:
                other, _ = self._serve(tool, self.validate(tool, call), None)
            except ToolException:
                continue
            if other not in (None, [], {}, "") and other != value:
                return silent.relabelled(other, value) if self._is_batch(tool, args) else other
        return value

    async def _python_silent(
        self, tool: str, args: ToolArgs, fault: FaultSpec, value: Any, timeout_s: float
    ) -> Any:
        """`_silent` for a Python tool: another entity's answer is its code's answer."""
        rng = self._plans[tool].pick()
        if fault.kind != "wrong_entity":
            return (
                silent.stale(value, fault)
                if fault.kind == "stale"
                else silent.corrupt(value, fault, rng)
            )
        options = enum_options(self.catalog.models[tool])
        for call in silent.other_calls(self._scenario, tool, args.model_dump(), rng, options):
            try:
                other = await self._python(tool, self.validate(tool, call), timeout_s)
            except Exception:  # another entity's call failing is no answer to give
                continue
            if other not in (None, [], {}, "") and other != value:
                return other
        return value

    async def _python(self, tool: str, args: ToolArgs, timeout_s: float) -> Any:
        call = self._python_calls[tool] = self._python_calls.get(tool, -1) + 1
        context = ToolContext.of(self.seed, self.trial, self.agent, tool, call)
        raw = await self.catalog.python[tool].call(args, timeout_s, context)
        return to_jsonable_python(raw, fallback=str)

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

    def _raise_for(self, fault: FaultSpec, tool: str, args: ToolArgs, timeout_s: float) -> None:
        kind = fault.kind
        host = f"{tool.replace('_', '-')}.internal"
        if kind == "transient":
            if fault.status:
                raise HTTPStatusError(fault.status, fault.error_text or f"HTTP {fault.status}")
            raise ConnectTimeout(
                fault.error_text or f"Error: connect ETIMEDOUT {host}:443 (upstream did not answer)"
            )
        if kind == "timeout":
            # The tool hangs for duration_s (forever when not given); the client gives up
            # at its per-call timeout, so that is the (simulated) time the call cost.
            raise CallTimeout(
                fault.error_text or f"TimeoutError: {tool} did not answer within {timeout_s:g}s",
                waited_s=timeout_s,
            )
        if kind == "rate_limit":
            ra = fault.retry_after_s if fault.retry_after_s is not None else 1.0
            raise HTTPStatusError(
                429, fault.error_text or f"HTTP 429 Too Many Requests (Retry-After: {ra:g})", ra
            )
        if kind == "permission":
            status = fault.status or 403
            text = "Unauthorized" if status == 401 else "Forbidden"
            raise HTTPStatusError(status, fault.error_text or f"HTTP {status} {text}")
        if kind == "not_found":
            raise HTTPStatusError(404, fault.error_text or "HTTP 404 Not Found")

    def _serve(
        self, tool: str, args: ToolArgs, fault: FaultSpec | None
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
        if isinstance(args, FetchManyArgs):
            out: dict[str, str] = {}
            errors: dict[str, str] = {}
            for doc_id in args.ids:
                failed = (
                    fault is not None
                    and fault.kind == "partial"
                    and (
                        self._items_rng(tool).random()
                        < (fault.item_p if fault.item_p is not None else 0.5)
                    )
                )
                if failed:
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
            if fault is not None and fault.kind == "partial" and isinstance(value, dict):
                p = fault.item_p if fault.item_p is not None else 0.5
                for item in sorted(value):
                    if self._items_rng(tool).random() < p:
                        del value[item]
                        errors[item] = "HTTP 503 Service Unavailable"
            return value, errors
        raise AssertionError(f"no handler for {type(args).__name__}")


def _parse_arguments(text: str) -> object:
    """A call's arguments as the model sent them: JSON text, perhaps cut off."""
    try:
        payload: object = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaViolation(
            f"SyntaxError: Unexpected end of JSON input at position {exc.pos}",
            field="(arguments)",
            constraint="a complete JSON object",
            received=text[:80],
        ) from None
    return payload


def _schema_violation(
    tool: str, model: type[ToolArgs], exc: ValidationError, spec: ToolSpec
) -> SchemaViolation:
    """The first schema error of a call, raised the way the tool's own runtime words it:
    Python's TypeError for a Python tool, a JavaScript client's for the built-in kinds."""
    err = exc.errors()[0]
    fld = ".".join(str(p) for p in err["loc"]) or "(arguments)"
    missing = err["type"] == "missing"
    unexpected = err["type"] == "extra_forbidden"
    python = spec.kind == "python"
    func = (spec.function or tool).rsplit(":", 1)[-1]
    if missing:
        raw = (
            f"TypeError: {func}() missing 1 required positional argument: '{fld}'"
            if python
            else f"TypeError: Cannot read properties of undefined (reading '{fld}')"
        )
        constraint = "required"
    elif unexpected:
        raw = (
            f"TypeError: {func}() got an unexpected keyword argument '{fld}'"
            if python
            else f"TypeError: unexpected keyword argument '{fld}'"
        )
        constraint = f"not a parameter of {tool}; allowed: {', '.join(model.model_fields)}"
    else:
        raw = f"TypeError: {fld}: {err['msg']}"
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


def empty_of(kind: str) -> Any:
    return {"metric_store": None, "paper_search": [], "batch_fetch": {}, "search": []}.get(kind)


def hidden_identifier(scenario: Scenario, trial: int, need: NeedSpec) -> bool:
    """Is the real identifier of `need` withheld from the model in this trial?

    A `bad_args` fault on the need's tool means the task only gives the human wording
    (seed 000: '2024年营收' for `fin.rev.2024`); with `p`, it applies to that share of
    trials; with `first_n`, to the first n trials."""
    for fault in scenario.tools[need.tool].faults:
        if fault.kind == "bad_args":
            if fault.first_n is not None:
                return trial < fault.first_n
            if fault.p is None:
                return True
            return stream(scenario.seed, trial, "world", need.id, "bad_args").random() < fault.p
    return False
