"""A ModelRequest as a Chat Completions body: the conversation, the tools, the repairs."""

from __future__ import annotations

import json
from typing import Any

from errorflow.models.anthropic.request import SUBMIT_SCHEMA, SUBMIT_TOOL
from errorflow.models.backend import (
    AssistantTurn,
    ModelRequest,
    NeedView,
    ObservationTurn,
    TaskTurn,
    ToolCall,
    ToolDef,
    UpstreamTurn,
)
from errorflow.models.openai.render import api_name, render_messages, render_tools
from errorflow.models.openai.wire import ChatWire
from errorflow.protocol.claims import Claim, FinalAnswer
from errorflow.scenario.spec.model import ModelSpec

TASK = TaskTurn(prompt="Find it.", needs=[NeedView("x", "lookup", "id", "the x", "x1")])
OK = {"ok": True, "result": 1}


def roles(messages: list[Any]) -> list[str]:
    return [m["role"] for m in messages]


def test_the_task_and_upstream_messages_are_one_user_message_after_the_system() -> None:
    upstream = UpstreamTurn(
        "researcher",
        "failed",
        0.2,
        [{"code": "permission_denied"}],
        FinalAnswer(claims=[Claim("x", 1)]),
    )
    messages = render_messages("You write.", [TASK, upstream])
    assert roles(messages) == ["system", "user"]
    assert messages[0]["content"].startswith("You write.\n\nHow to work:")
    text = messages[1]["content"]
    assert text.startswith("Find it.") and "\n\nMessage from upstream agent 'researcher':\n" in text
    assert '"permission_denied"' in text


def test_calls_get_their_results_right_after_and_a_missing_one_an_error() -> None:
    calls = [ToolCall("a", "lookup", {"id": "x1"}), ToolCall("b", "lookup", {"id": "x2"})]
    turns = [TASK, AssistantTurn(calls, "looking"), ObservationTurn("b", "lookup", OK)]
    messages = render_messages("", turns)
    assert roles(messages) == ["system", "user", "assistant", "tool", "tool"]
    assert messages[2]["content"] == "looking"
    assert [m["tool_call_id"] for m in messages[3:]] == ["a", "b"]
    missing = json.loads(messages[3]["content"])
    assert missing["is_error"] is True and missing["ok"] is False
    assert json.loads(messages[4]["content"]) == OK  # a result that is ok is not marked


def test_a_result_for_no_call_of_the_message_before_is_user_text() -> None:
    turns = [
        TASK,
        AssistantTurn([ToolCall("a", "lookup", {})]),
        ObservationTurn("a", "lookup", OK),
        ObservationTurn("zz", "lookup", OK),
    ]
    messages = render_messages("", turns)
    assert roles(messages) == ["system", "user", "assistant", "tool", "user"]
    assert messages[-1]["content"].startswith("Result of tool call zz: ")


def test_a_truncated_call_goes_back_as_the_text_it_was() -> None:
    turns = [TASK, AssistantTurn([ToolCall("a", "look.up", '{"id": "x')])]
    assistant = render_messages("", turns)[2]
    assert assistant["tool_calls"][0]["function"] == {"name": "look_up", "arguments": '{"id": "x'}
    assert assistant["content"] == ""  # a string, never null (llama.cpp refuses null)


def test_the_conversation_starts_with_a_user_and_ends_without_the_assistant() -> None:
    assert roles(render_messages("", [])) == ["system", "user"]
    messages = render_messages("", [AssistantTurn([], "hello")])
    assert roles(messages) == ["system", "user", "assistant", "user"]
    assert (messages[1]["content"], messages[3]["content"]) == ("Begin.", "Continue.")
    assert roles(render_messages("", [TASK, AssistantTurn([], "")])) == ["system", "user"]


def test_tool_names_are_made_safe_and_mapped_back() -> None:
    assert api_name("metrics.query") == "metrics_query" and api_name("ok_name-1") == "ok_name-1"
    tool = ToolDef("metrics.query", "Read a metric.", {"properties": {"name": {"type": "string"}}})
    request = ModelRequest("a", "researcher", "", [TASK], [tool])
    body, names = ChatWire.of(
        ModelSpec(backend="openai", model="m", base_url="http://h/v1")
    ).render(request)
    assert names == {"metrics_query": "metrics.query"}
    functions = [t["function"] for t in body["tools"]]
    assert [f["name"] for f in functions] == ["metrics_query", SUBMIT_TOOL]
    assert functions[0]["parameters"]["type"] == "object"


def test_openai_s_own_api_gets_max_completion_tokens_and_no_temperature() -> None:
    request = ModelRequest("a", "researcher", "", [TASK], [])
    hosted, _ = ChatWire.of(ModelSpec(backend="openai", model="gpt-5")).render(request)
    assert hosted["max_completion_tokens"] == 1024
    assert "max_tokens" not in hosted and "temperature" not in hosted
    local = ModelSpec(backend="openai", model="m", base_url="http://127.0.0.1:8000/v1")
    body, _ = ChatWire.of(local).render(request)
    assert (body["max_tokens"], body["temperature"]) == (1024, 0.7)
    never, _ = ChatWire.of(local, "never").render(request)
    assert "temperature" not in never
    always, _ = ChatWire.of(ModelSpec(backend="openai", model="gpt-4.1"), "always").render(request)
    assert always["temperature"] == 0.7


def test_a_claim_value_is_typed_so_a_grammar_can_be_built_from_it() -> None:
    # An untyped value makes llama.cpp's server constrain the answer to any JSON at all,
    # which a small model writes without end; every JSON type is the same "any value".
    [tool] = render_tools([])
    submit: Any = tool
    claim = submit["function"]["parameters"]["properties"]["claims"]["items"]
    assert sorted(claim["properties"]["value"]["type"]) == sorted(
        ["string", "number", "integer", "boolean", "array", "object", "null"]
    )
    assert claim["required"] == ["key", "value", "certain"]
    shared: Any = SUBMIT_SCHEMA
    value = shared["properties"]["claims"]["items"]["properties"]["value"]
    assert "type" not in value  # the Anthropic backend's schema stays its own


def test_an_agent_without_tools_is_asked_for_its_answer_by_name() -> None:
    # llama.cpp's server bounds a reply by max_tokens only when a tool is chosen by name.
    spec = ModelSpec(backend="openai", model="m", base_url="http://h/v1")
    tool = ToolDef("lookup", "Look it up.", {"properties": {"id": {"type": "string"}}})
    with_tools, _ = ChatWire.of(spec).render(ModelRequest("a", "researcher", "", [TASK], [tool]))
    assert with_tools["tool_choice"] == "auto"
    alone, _ = ChatWire.of(spec).render(ModelRequest("a", "writer", "", [TASK], []))
    assert alone["tool_choice"] == {"type": "function", "function": {"name": SUBMIT_TOOL}}
