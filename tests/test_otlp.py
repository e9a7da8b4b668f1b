"""OpenTelemetry export: a trace per trial with GenAI / OpenInference spans, provenance as
links, reproducible ids; sent over OTLP/HTTP to a receiver and read back."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from errorflow.agents.model_gate import MAX_CONTENT_CHARS, content_text
from errorflow.bus.transport import InProcessBus
from errorflow.cli.main import main
from errorflow.models.backend import ModelRequest, TaskTurn
from errorflow.reports import otlp
from errorflow.runtime.run_options import RunOptions
from errorflow.runtime.runner import run_plan
from errorflow.scenario.bundled import resolve
from errorflow.scenario.loader import load
from errorflow.scenario.overrides import apply
from errorflow.scenario.run_plan import RunPlan
from errorflow.store.readers import get_run
from errorflow.store.trial_store import load_trace
from tests.conftest import free_port
from tests.otlp_receiver import Phoenix, ProtoReceiver, phoenix_binary
from tests.trace_runs import run_stored

TRIALS = 4


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("otlp") / "o.db"
    result, _ = run_stored("contamination", db, trials=TRIALS, propagation="implicit")
    return db, result.run_id


def export_json(db: Path, run_id: str, out: Path) -> list[dict[str, Any]]:
    args = ["export", run_id, "--format", "otlp-json", "-o", str(out), "--db", str(db)]
    assert main(args) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def spans_of(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for rs in request["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def attrs(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", [])}


def test_one_trace_per_trial_with_the_same_ids_every_time(
    stored: tuple[Path, str], tmp_path: Path
) -> None:
    db, run_id = stored
    first = export_json(db, run_id, tmp_path / "a.jsonl")
    again = export_json(db, run_id, tmp_path / "b.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert len(first) == TRIALS and first == again
    for trial, request in enumerate(first):
        ids = {s["traceId"] for s in spans_of(request)}
        assert ids == {f"{otlp.trace_id(run_id, trial):032x}"}


def test_spans_follow_the_genai_conventions_with_labels_and_links(
    stored: tuple[Path, str], tmp_path: Path
) -> None:
    db, run_id = stored
    spans = spans_of(export_json(db, run_id, tmp_path / "t.jsonl")[0])
    by_name = {s["name"]: s for s in spans}
    root = by_name["trial 0"]
    researcher, writer = by_name["invoke_agent researcher"], by_name["invoke_agent writer"]
    tool = by_name["execute_tool search_papers"]
    chats = {s["parentSpanId"]: s for s in spans if s["name"] == "chat small-local"}
    assert sorted(chats) == sorted([researcher["spanId"], writer["spanId"]])
    chat = chats[researcher["spanId"]]
    assert "parentSpanId" not in root or not root["parentSpanId"]
    assert researcher["parentSpanId"] == root["spanId"] == writer["parentSpanId"]
    assert tool["parentSpanId"] == researcher["spanId"]
    a = attrs(root)
    assert (a["openinference.span.kind"], a["errorflow.outcome"], a["errorflow.depth"]) == (
        "CHAIN",
        "contaminated",
        "2",
    )
    assert (a["errorflow.origin.agent"], a["errorflow.origin.tool"]) == (
        "researcher",
        "search_papers",
    )
    a = attrs(researcher)
    assert (a["gen_ai.operation.name"], a["gen_ai.agent.name"], a["openinference.span.kind"]) == (
        "invoke_agent",
        "researcher",
        "AGENT",
    )
    assert a["errorflow.label"] == "contaminated" and a["errorflow.handling"] == "swallowed"
    assert a["errorflow.label.reason"].startswith("false claim(s)")
    a = attrs(tool)
    assert (a["gen_ai.operation.name"], a["gen_ai.tool.name"], a["openinference.span.kind"]) == (
        "execute_tool",
        "search_papers",
        "TOOL",
    )
    assert a["error.type"] == "permission_denied" and tool["status"]["code"] == 2  # ERROR
    a = attrs(chat)
    assert (a["gen_ai.operation.name"], a["openinference.span.kind"]) == ("chat", "LLM")
    assert int(a["gen_ai.usage.output_tokens"]) > 0
    # provenance: the writer worked from the researcher's message
    assert [link["spanId"] for link in writer["links"]] == [researcher["spanId"]]


def test_received_by_an_otlp_http_receiver_with_parents_and_links(
    stored: tuple[Path, str], tmp_path: Path
) -> None:
    db, run_id = stored
    expected = [s for r in export_json(db, run_id, tmp_path / "e.jsonl") for s in spans_of(r)]
    with ProtoReceiver() as receiver:
        assert main(["export", run_id, "--otlp", receiver.url, "--db", str(db)]) == 0
    got = {s["span_id"]: s for s in receiver.spans}
    assert sorted(got) == sorted(s["spanId"] for s in expected)
    for s in expected:
        mine = got[s["spanId"]]
        assert mine["name"] == s["name"] and mine["trace_id"] == s["traceId"]
        assert mine["parent"] == (s.get("parentSpanId") or None)
        assert mine["links"] == [(link["traceId"], link["spanId"]) for link in s.get("links", [])]
    writers = [s for s in receiver.spans if s["name"] == "invoke_agent writer"]
    assert len(writers) == TRIALS
    for w in writers:  # each links to its own trial's researcher
        ((trace, span),) = w["links"]
        assert got[span]["name"] == "invoke_agent researcher" and trace == w["trace_id"]
    assert {s["resource"]["openinference.project.name"] for s in receiver.spans} == {run_id}


def test_a_receiver_that_is_not_there_is_a_connection_error(stored: tuple[Path, str]) -> None:
    db, run_id = stored
    run = get_run(db, run_id)
    trace = load_trace(db, run_id, 0)
    assert run is not None and trace is not None
    spans = otlp.trial_spans(
        trace, otlp.agent_models(run["scenario_json"]), otlp.run_resource(run_id, "contamination")
    )
    with pytest.raises(ConnectionError, match="did not take the spans"):
        otlp.send(spans, f"http://127.0.0.1:{free_port()}", timeout_s=1)


@pytest.mark.slow
def test_phoenix_receives_the_traces(stored: tuple[Path, str], tmp_path: Path) -> None:
    """A real OpenTelemetry backend (Arize Phoenix, from PyPI) takes the export and gives
    back every span with its parent; Phoenix keeps no span links, so the provenance is
    read from `errorflow.derived_from` here (the links from the receiver above)."""
    binary = phoenix_binary()
    if binary is None:
        pytest.skip(
            "Arize Phoenix not installed (pip install arize-phoenix, in a venv of its "
            "own; ERRORFLOW_TEST_PHOENIX=PATH/TO/phoenix)"
        )
    db, run_id = stored
    expected = [s for r in export_json(db, run_id, tmp_path / "p.jsonl") for s in spans_of(r)]
    with Phoenix(binary, tmp_path) as phoenix:
        assert main(["export", run_id, "--otlp", phoenix.url, "--db", str(db)]) == 0
        deadline = time.monotonic() + 60
        spans = phoenix.spans(run_id)
        while len(spans) < len(expected) and time.monotonic() < deadline:
            time.sleep(0.5)  # Phoenix writes what it received in the background
            spans = phoenix.spans(run_id)
    got = {s["context"]["span_id"]: s for s in spans}
    assert sorted(got) == sorted(s["spanId"] for s in expected)
    for s in expected:
        theirs = got[s["spanId"]]
        assert theirs["name"] == s["name"]
        assert theirs["parent_id"] == (s.get("parentSpanId") or None)
        assert theirs["context"]["trace_id"] == s["traceId"]
    kinds = {s["name"].split()[0]: s["span_kind"] for s in spans}
    assert kinds["invoke_agent"] == "AGENT" and kinds["execute_tool"] == "TOOL"
    assert kinds["chat"] == "LLM" and kinds["trial"] == "CHAIN"
    writers = [s for s in spans if s["name"] == "invoke_agent writer"]
    for w in writers:
        (parent,) = w["attributes"]["errorflow.derived_from"]
        assert got[parent]["name"] == "invoke_agent researcher"


@pytest.fixture(scope="module")
def retried(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, int]:
    """A stored run whose triage retries get_ticket after 30 s timeouts; the trial with
    the most attempts."""
    from errorflow import api

    db = tmp_path_factory.mktemp("otlp-retry") / "r.db"
    scenario = api.override(
        api.load("support-pipeline"), {"agents.triage.policy.strategy": "resilient"}
    )
    result = api.run(scenario, trials=8, db=db)
    retries = {
        n: sum(d.kind == "retry" for d in result.trace(n).genealogy.timeline) for n in range(8)
    }
    trial = max(retries, key=lambda n: retries[n])
    assert retries[trial] >= 1
    return db, result.run_id, trial


def attempt_spans(db: Path, run_id: str, trial: int, out: Path, clock: str) -> list[Any]:
    args = ["export", run_id, "--format", "otlp-json", "--span-time", clock, "-o", str(out),
            "--db", str(db)]  # fmt: skip
    assert main(args) == 0
    request = json.loads(out.read_text().splitlines()[trial])
    return spans_of(request)


def seconds(span: dict[str, Any]) -> float:
    return (int(span["endTimeUnixNano"]) - int(span["startTimeUnixNano"])) / 1e9


def test_a_retried_call_has_a_span_per_attempt_on_the_simulated_clock(
    retried: tuple[Path, str, int], tmp_path: Path
) -> None:
    db, run_id, trial = retried
    trace = load_trace(db, run_id, trial)
    assert trace is not None
    retries = [d for d in trace.genealogy.timeline if d.kind == "retry"]
    spans = attempt_spans(db, run_id, trial, tmp_path / "sim.jsonl", "sim")
    by_id = {s["spanId"]: s for s in spans}
    attempts = [s for s in spans if s["name"].startswith("attempt ")]
    calls = {by_id[s["parentSpanId"]]["name"] for s in attempts}
    assert calls == {"execute_tool get_ticket"}
    assert len(attempts) == len(retries) + 1
    failed = [s for s in attempts if attrs(s).get("error.type") == "timeout"]
    assert len(failed) == len(retries) and all(s["status"].get("code") for s in failed)
    # a timeout took 30 simulated seconds; on the wall clock the whole call is instant
    assert all(seconds(s) == pytest.approx(30.0, abs=1.0) for s in failed)
    gap = int(attempts[1]["startTimeUnixNano"]) - int(attempts[0]["endTimeUnixNano"])
    assert gap / 1e9 == pytest.approx(retries[0].delay_s, abs=1e-6)
    wall = attempt_spans(db, run_id, trial, tmp_path / "wall.jsonl", "wall")
    tool = next(s for s in wall if s["name"] == "execute_tool get_ticket")
    assert seconds(tool) < 5 and seconds(by_id[tool["spanId"]]) >= 30


def test_headers_come_from_otel_exporter_otlp_headers_as_langfuse_wants_them(
    stored: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, run_id = stored
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Basic cGs6c2s=")
    with ProtoReceiver() as receiver:
        assert main(["export", run_id, "--otlp", receiver.url, "--db", str(db)]) == 0
    assert receiver.authorizations and set(receiver.authorizations) == {"Basic cGs6c2s="}


def test_model_content_is_kept_only_when_the_model_records_it(tmp_path: Path) -> None:
    db = tmp_path / "content.db"
    scenario = apply(
        load(resolve("contamination")),
        {"trials": 2, "agents.writer.model.record_content": True},
    )
    result = asyncio.run(run_plan(RunPlan(scenario), RunOptions(bus=InProcessBus(), db_path=db)))
    spans = [s for r in export_json(db, result.run_id, tmp_path / "c.jsonl") for s in spans_of(r)]
    chats = {attrs(s)["errorflow.agent"]: attrs(s) for s in spans if s["name"].startswith("chat ")}
    writer, researcher = chats["writer"], chats["researcher"]
    prompt = json.loads(writer["input.value"])
    assert prompt["agent"] == "writer" and prompt["turns"], "the request, as JSON"
    reply = json.loads(writer["output.value"])
    assert "final" in reply and writer["input.mime_type"] == "application/json"
    # the researcher's model does not record: nothing of its content is stored or sent
    assert "input.value" not in researcher and "output.value" not in researcher
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT envelope FROM events WHERE type = 'model_call'").fetchall()
    stored = [json.loads(env)["payload"] for (env,) in rows]
    assert {("prompt" in e) for e in stored if e["agent"] == "researcher"} == {False}
    assert {("prompt" in e) for e in stored if e["agent"] == "writer"} == {True}


def test_model_content_is_redacted_and_clipped() -> None:
    request = ModelRequest(
        agent="a", role="writer", system="s", tools=[],
        turns=[TaskTurn(prompt="key sk-ant-api03-" + "x" * 40 + " " + "y" * 20_000, needs=[])],
    )  # fmt: skip
    text = content_text(request)
    assert "sk-ant-api03" not in text
    assert len(text) == MAX_CONTENT_CHARS and text.endswith("...")


def test_a_groups_export_says_its_baselines_traces_are_in_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "g.db"
    assert main(["run", "contamination", "--trials", "2", "--baseline", "--json",
                 "--db", str(db)]) == 0  # fmt: skip
    run = get_run(db, json.loads(capsys.readouterr().out)["run_id"])
    assert run is not None and run["group_id"] is not None
    group = run["group_id"]
    out = tmp_path / "g.jsonl"
    assert main(["export", group, "--format", "otlp-json", "-o", str(out), "--db", str(db)]) == 0
    said = capsys.readouterr().err
    assert "1 of the group's 2 runs are fault-free baselines" in said and "-baseline" in said
    assert len(out.read_text().splitlines()) == 4  # both runs' trials
