"""Stored trials as OpenTelemetry traces: one trace per trial, built with the official
SDK, sent with its OTLP/HTTP exporter or written as OTLP JSON (the `otel` extra:
`pip install 'errorflow[otel]'`).

The spans follow the OpenTelemetry GenAI semantic conventions and carry OpenInference's
span kinds, so a run opens in Jaeger, Phoenix or Langfuse:

- the trial: `trial N` (`openinference.span.kind` CHAIN), with the outcome, depth and
  root cause as `errorflow.*` attributes;
- each agent invocation under it: `invoke_agent AGENT` (`gen_ai.operation.name`
  invoke_agent, `gen_ai.agent.name`; AGENT), with its message's status, confidence,
  errors, label and the label's reason; provenance (`derived_from`) is span links to the
  invocations whose messages it worked from (and `errorflow.derived_from`, their span
  ids, for receivers that keep no links);
- each model turn under its invocation: `chat MODEL` (`gen_ai.request.model`,
  `gen_ai.usage.*`; LLM), a failed attempt with `error.type`;
- each tool call: `execute_tool TOOL` (`gen_ai.tool.name`, `gen_ai.tool.call.id`;
  TOOL), with `error.type` = the taxonomy code when it failed; its retries, breaker
  transitions and guard blocks as span events; a call that was retried has a child
  span per attempt (`attempt K`, a failed one with its `error.type`), split at its
  retry events.

Ids are derived from the run id and the trial (SHA-256), so exporting a run twice gives
the same trace and span ids. Span times are the senders' wall clocks as stored
(`clock="wall"`, the default: a simulated backoff takes microseconds there), or, with
`clock="sim"`, the trial's first wall stamp plus each event's simulated time (`at`):
a call retried after 30 s timeouts then spans its 30 s. Simulated seconds are
attributes either way.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from errorflow import __version__
from errorflow.scoring.genealogy_types import (
    Decision,
    Invocation,
    ToolCallView,
)
from errorflow.scoring.trial_trace import TrialTrace

SCOPE = InstrumentationScope("errorflow", __version__)
#: Decisions that become events on the span of the call they belong to.
#: The clock span times are read from: the senders' wall clocks, or the simulated one.
Clock = Literal["wall", "sim"]
POLICY_KINDS = frozenset({"retry", "retries_exhausted", "breaker", "guard"})
#: Spans per request when sending (well under any receiver's limit).
BATCH = 512


@dataclass(frozen=True)
class AgentModel:
    provider: str  # gen_ai.provider.name
    model: str  # gen_ai.request.model


def agent_models(scenario_json: str) -> dict[str, AgentModel]:
    """Each agent's model, from the stored (redacted) scenario."""
    try:
        agents = json.loads(scenario_json).get("agents") or {}
    except (ValueError, AttributeError):
        return {}
    out = {}
    for name, spec in agents.items():
        model = (spec or {}).get("model") or {}
        backend = str(model.get("backend") or "simulated")
        provider = backend if backend in ("anthropic", "openai") else f"errorflow.{backend}"
        out[str(name)] = AgentModel(provider, str(model.get("model") or model.get("profile")))
    return out


def trace_id(run_id: str, trial: int) -> int:
    return _id(f"errorflow/{run_id}/{trial}", 16)


def span_id(run_id: str, trial: int, key: str) -> int:
    return _id(f"errorflow/{run_id}/{trial}/{key}", 8)


def _id(text: str, size: int) -> int:
    value = int.from_bytes(hashlib.sha256(text.encode()).digest()[:size], "big")
    return value or 1  # an all-zero id is invalid


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


class _Builder:
    """The spans of one trial."""

    def __init__(
        self,
        t: TrialTrace,
        models: Mapping[str, AgentModel],
        resource: Resource,
        clock: Clock = "wall",
    ):
        self.t, self.models, self.resource = t, models, resource
        self.trace_id = trace_id(t.run_id, t.trial)
        self.spans: list[ReadableSpan] = []
        self.sim = clock == "sim"
        self.base = min([m.ts for m in t.genealogy.messages] or [0.0])

    def when(self, d: Decision) -> float:
        """A decision's time on the spans' clock (sim: the base plus its `at`, when known)."""
        return self.base + d.at if self.sim and d.at is not None else d.ts

    def context(self, key: str) -> SpanContext:
        sid = span_id(self.t.run_id, self.t.trial, key)
        return SpanContext(self.trace_id, sid, is_remote=False, trace_flags=TraceFlags(1))

    def add(
        self,
        name: str,
        key: str,
        parent: SpanContext | None,
        start: float,
        end: float,
        attributes: Mapping[str, Any],
        *,
        kind: SpanKind = SpanKind.INTERNAL,
        status: Status | None = None,
        events: Sequence[Event] = (),
        links: Sequence[Link] = (),
    ) -> SpanContext:
        context = self.context(key)
        self.spans.append(
            ReadableSpan(
                name=name,
                context=context,
                parent=parent,
                resource=self.resource,
                attributes={k: v for k, v in attributes.items() if v is not None},
                events=events,
                links=links,
                kind=kind,
                status=status or Status(StatusCode.UNSET),
                start_time=_ns(start),
                end_time=_ns(max(start, end)),
                instrumentation_scope=SCOPE,
            )
        )
        return context


def _root_attributes(t: TrialTrace) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "openinference.span.kind": "CHAIN",
        "gen_ai.conversation.id": f"{t.run_id}-t{t.trial}",
        "session.id": t.run_id,
        "input.value": t.task,
        "errorflow.run_id": t.run_id,
        "errorflow.scenario": t.scenario,
        "errorflow.trial": t.trial,
        "errorflow.propagation": t.propagation,
        "errorflow.outcome": t.outcome or "not_scored",
        "errorflow.depth": t.depth,
        "errorflow.reason": t.reason or None,
    }
    rc = t.root_cause
    if rc is not None and rc.primary is not None:
        o = rc.primary
        attrs.update(
            {
                "errorflow.origin.kind": o.kind,
                "errorflow.origin.agent": o.agent,
                "errorflow.origin.tool": o.tool,
                "errorflow.origin.step": o.step,
                "errorflow.origin.call_id": o.call_id,
                "errorflow.origin.code": o.code,
                "errorflow.dropped_by": [f"{d.agent}:{d.how}" for d in rc.dropped],
                "errorflow.contamination.starts": list(rc.starts),
                "errorflow.contamination.edges": [f"{a}->{b}" for a, b in rc.edges],
            }
        )
        if o.code:
            attrs["error.type"] = o.code
    return attrs


def _agent_attributes(t: TrialTrace, inv: Invocation, model: AgentModel | None) -> dict[str, Any]:
    m = t.genealogy.by_id()[inv.outputs[0]]
    attrs: dict[str, Any] = {
        "openinference.span.kind": "AGENT",
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": inv.agent,
        "gen_ai.agent.id": f"{inv.agent}#{inv.index}",
        "gen_ai.provider.name": model.provider if model else None,
        "gen_ai.request.model": model.model if model else None,
        "gen_ai.conversation.id": f"{t.run_id}-t{t.trial}",
        "output.value": m.text or None,
        "errorflow.message.id": m.id,
        "errorflow.message.recipient": m.recipient,
        "errorflow.message.status": m.status,
        "errorflow.message.confidence": m.confidence,
        "errorflow.message.errors": json.dumps([vars(e) for e in m.errors]) if m.errors else None,
        "errorflow.message.flags": list(m.flags) or None,
        "errorflow.label": m.label,
        "errorflow.label.reason": m.reason or None,
        "errorflow.handling": m.handling,
        "errorflow.own_failures": list(m.own_failures) or None,
        "errorflow.round": m.round,
        "errorflow.steps": inv.steps,
        "errorflow.sim_seconds": inv.sim_seconds,
        "errorflow.stopped": inv.stopped,
    }
    if m.own_failures:
        attrs["error.type"] = m.own_failures[0]
    return attrs


def _agent_status(t: TrialTrace, inv: Invocation) -> Status:
    m = t.genealogy.by_id()[inv.outputs[0]]
    if m.label == "contaminated":
        return Status(StatusCode.ERROR, f"contaminated: {m.reason}")
    if m.own_failures:
        return Status(StatusCode.ERROR, ", ".join(m.own_failures))
    return Status(StatusCode.UNSET)


def _policy_event(d: Decision) -> Event:
    attrs = {"errorflow.tool": d.tool, "error.type": d.code, "errorflow.delay_s": d.delay_s,
             "errorflow.at": d.at, "errorflow.text": d.text}  # fmt: skip
    return Event(d.kind, {k: v for k, v in attrs.items() if v is not None}, _ns(d.ts))


def _tool_span(b: _Builder, inv: Invocation, parent: SpanContext, call: ToolCallView,
               start: float, end: float, events: list[Event]) -> None:  # fmt: skip
    attrs = {
        "openinference.span.kind": "TOOL",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.tool,
        "gen_ai.tool.call.id": call.call_id,
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.arguments": json.dumps(call.args, sort_keys=True, default=str),
        "tool.name": call.tool,
        "input.value": json.dumps(call.args, sort_keys=True, default=str),
        "output.value": call.shown,
        "http.response.status_code": call.http_status,
        "error.type": call.code,
        "errorflow.agent": inv.agent,
        "errorflow.step": call.step,
        "errorflow.attempts": call.attempts,
        "errorflow.error": call.error,
        "errorflow.ok": call.ok,
    }
    failed = not call.ok
    status = Status(StatusCode.ERROR, call.error or call.code or "") if failed else None
    b.add(f"execute_tool {call.tool}", f"inv{inv.index}/seq{call.seq}", parent, start, end,
          attrs, status=status, events=events)  # fmt: skip


def _attempt_spans(b: _Builder, inv: Invocation, call: ToolCallView, start: float,
                   end: float, retries: Sequence[Decision]) -> None:  # fmt: skip
    """A retried call's attempts as child spans of its tool span: attempt k ends at the
    k-th retry event (failed, with its class) and the next starts after its backoff; the
    last ends with the call."""
    if call.attempts < 2 or not retries:
        return
    key = f"inv{inv.index}/seq{call.seq}"
    parent = b.context(key)
    for k, retry in enumerate(retries, 1):
        stop = b.when(retry)
        attrs = {"errorflow.attempt": k, "error.type": retry.code, "gen_ai.tool.name": call.tool,
                 "errorflow.delay_s": retry.delay_s, "errorflow.at": retry.at}  # fmt: skip
        b.add(f"attempt {k}", f"{key}/a{k}", parent, start, stop, attrs,
              status=Status(StatusCode.ERROR, retry.code or "failed"))  # fmt: skip
        start = stop + (retry.delay_s or 0.0) * b.sim
    last = len(retries) + 1
    status = Status(StatusCode.ERROR, call.code or "") if not call.ok else None
    attrs = {"errorflow.attempt": last, "gen_ai.tool.name": call.tool, "error.type": call.code}
    b.add(f"attempt {last}", f"{key}/a{last}", parent, min(start, end), end, attrs,
          status=status)  # fmt: skip


def _chat_span(b: _Builder, inv: Invocation, parent: SpanContext, d: Decision, start: float,
               model: AgentModel | None, events: list[Event]) -> None:  # fmt: skip
    name = model.model if model else "model"
    attrs: dict[str, Any] = {
        "openinference.span.kind": "LLM",
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": model.provider if model else None,
        "gen_ai.request.model": name,
        "llm.model_name": name,
        "errorflow.agent": inv.agent,
        "errorflow.step": d.step,
        "errorflow.text": d.text,
    }
    for side in ("input", "output"):  # recorded only with `model.record_content`
        text = d.facts.get("prompt" if side == "input" else "response")
        if isinstance(text, str):
            attrs[f"{side}.value"], attrs[f"{side}.mime_type"] = text, "application/json"
    status = None
    if d.kind == "model_error":
        attrs["error.type"] = d.code
        status = Status(StatusCode.ERROR, d.text)
    b.add(f"chat {name}", f"inv{inv.index}/seq{d.seq}", parent, start, b.when(d), attrs,
          kind=SpanKind.CLIENT, status=status, events=events)  # fmt: skip


def _usage(d: Decision) -> dict[str, Any]:
    def count(key: str) -> int | None:
        value = d.facts.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    stop = d.facts.get("stop_reason")
    tokens_in, tokens_out = count("input_tokens"), count("output_tokens")
    return {
        "gen_ai.usage.input_tokens": tokens_in,
        "gen_ai.usage.output_tokens": tokens_out,
        "llm.token_count.prompt": tokens_in,
        "llm.token_count.completion": tokens_out,
        "gen_ai.response.finish_reasons": [stop] if isinstance(stop, str) else None,
    }


def _children(b: _Builder, inv: Invocation, parent: SpanContext, start: float) -> list[Event]:
    """The invocation's model turns and tool calls as child spans, in order; the policy
    decisions as events of the call they belong to. Returns the decisions left over
    (loop stops) for the invocation's own span."""
    calls = {c.seq: c for c in inv.tool_calls}
    model = b.models.get(inv.agent)
    pending: list[Event] = []
    retries: list[Decision] = []
    left: list[Event] = []
    prev = start
    for d in b.t.genealogy.timeline:
        if d.invocation != inv.index:
            continue
        if d.kind in POLICY_KINDS:
            pending.append(_policy_event(d))
            retries += [d] if d.kind == "retry" else []
        elif d.kind == "tool_call" and d.seq in calls:
            _tool_span(b, inv, parent, calls[d.seq], prev, b.when(d), pending)
            _attempt_spans(b, inv, calls[d.seq], prev, b.when(d), retries)
            pending, retries, prev = [], [], b.when(d)
        elif d.kind in ("model_call", "model_error"):
            usage = {} if d.kind == "model_error" else _usage(d)
            _chat_span(b, inv, parent, d, prev, model, pending)
            b.spans[-1] = _with(b.spans[-1], usage)
            pending, retries, prev = [], [], b.when(d)
        else:
            left.append(_policy_event(d))
    return pending + left


def _with(span: ReadableSpan, extra: Mapping[str, Any]) -> ReadableSpan:
    attrs = {**(span.attributes or {}), **{k: v for k, v in extra.items() if v is not None}}
    return ReadableSpan(
        name=span.name, context=span.context, parent=span.parent, resource=span.resource,
        attributes=attrs, events=span.events, links=span.links, kind=span.kind,
        status=span.status, start_time=span.start_time, end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )  # fmt: skip


def _times(b: _Builder, inv: Invocation) -> tuple[float, float]:
    if b.sim:  # from its first to its last decision, on the simulated clock
        stamps = [b.when(d) for d in b.t.genealogy.timeline if d.invocation == inv.index]
        if stamps:
            return min(stamps), max(stamps)
    g = b.t.genealogy
    nodes = g.by_id()
    ins = [nodes[d].ts for d in inv.inputs if d in nodes]
    outs = [nodes[d].ts for d in inv.outputs if d in nodes]
    start = inv.start_ts if inv.start_ts is not None else max(ins, default=min(outs))
    return start, max(outs, default=start)


def trial_spans(
    t: TrialTrace, models: Mapping[str, AgentModel], resource: Resource, clock: Clock = "wall"
) -> list[ReadableSpan]:
    """Every span of one trial: the trial, its invocations and their calls (and their
    attempts); `clock`: the span times, wall as stored or simulated (the module's doc)."""
    b = _Builder(t, models, resource, clock)
    g = t.genealogy
    stamps = [m.ts for m in g.messages] or [0.0]
    if b.sim:
        stamps = [b.base, *(b.when(d) for d in g.timeline)]
    failed = t.root_cause is not None
    status = Status(StatusCode.ERROR, t.outcome or "") if failed else Status(StatusCode.OK)
    root = b.add(f"trial {t.trial}", "trial", None, min(stamps), max(stamps),
                 _root_attributes(t), status=status)  # fmt: skip
    made_by = {mid: inv.index for inv in g.invocations for mid in inv.outputs}
    for inv in g.invocations:
        start, end = _times(b, inv)
        context = b.context(f"inv{inv.index}")
        leftover = _children(b, inv, context, start)
        nodes = g.by_id()
        links = [
            Link(b.context(f"inv{made_by[d]}"), {"errorflow.link": "derived_from",
                 "errorflow.message.id": d, "errorflow.label": nodes[d].label or "none"})
            for d in inv.inputs if d in made_by
        ]  # fmt: skip
        attrs = _agent_attributes(t, inv, models.get(inv.agent))
        attrs["errorflow.derived_from"] = [f"{link.context.span_id:016x}" for link in links]
        b.add(f"invoke_agent {inv.agent}", f"inv{inv.index}", root, start, end, attrs,
              status=_agent_status(t, inv), events=leftover, links=links)  # fmt: skip
    return b.spans


def run_resource(run_id: str, scenario: str) -> Resource:
    # Not Resource.create: its detectors add a random `service.instance.id`, and an
    # export must be the same every time.
    return Resource(
        {
            "service.name": "errorflow",
            "service.version": __version__,
            "openinference.project.name": run_id,
            "errorflow.run_id": run_id,
            "errorflow.scenario": scenario,
        }
    )


def _hex_ids(node: Any) -> Any:
    """OTLP/JSON writes trace and span ids as hex (protobuf's JSON writes bytes as
    base64)."""
    if isinstance(node, list):
        return [_hex_ids(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
            out[key] = base64.b64decode(value).hex()
        else:
            out[key] = _hex_ids(value)
    return out


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """One OTLP/JSON `ExportTraceServiceRequest` holding `spans`."""
    request = encode_spans(spans)
    doc: dict[str, Any] = MessageToDict(request, use_integers_for_enums=True)
    return dict(_hex_ids(doc))


def send(spans: Iterable[ReadableSpan], endpoint: str, timeout_s: float = 10.0) -> int:
    """Send the spans to an OTLP/HTTP receiver (`http://HOST:4318`, or a full
    `.../v1/traces` URL); the number sent. Raises ConnectionError when it refuses them."""
    url = (
        endpoint
        if endpoint.rstrip("/").endswith("/v1/traces")
        else (endpoint.rstrip("/") + "/v1/traces")
    )
    exporter = OTLPSpanExporter(endpoint=url, timeout=timeout_s)
    sent = 0
    batch: list[ReadableSpan] = []
    # The exporter logs every failed attempt; a refusal is said once, by the caller.
    quiet = logging.getLogger("opentelemetry.exporter")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        for span in spans:
            batch.append(span)
            if len(batch) >= BATCH:
                sent += _export(exporter, batch, url, sent)
                batch = []
        if batch:
            sent += _export(exporter, batch, url, sent)
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
        quiet.setLevel(level)
    return sent


def _export(exporter: OTLPSpanExporter, batch: list[ReadableSpan], url: str, sent: int) -> int:
    if exporter.export(batch) is not SpanExportResult.SUCCESS:
        raise ConnectionError(
            f"the OTLP receiver at {url} did not take the spans ({sent} sent before)"
        )
    return len(batch)
