"""What a model server answered, judged: the API's reply, or what came instead."""

from __future__ import annotations

import json

import pytest

from errorflow.models.server_reply import (
    NotAReply,
    messages_reply,
    model_description,
    read_reply,
    refused_for_good,
)
from errorflow.protocol.envelope import JsonObject

REPLY: JsonObject = {
    "type": "message",
    "role": "assistant",
    "content": [{"type": "text", "text": "hi"}],
    "stop_reason": "end_turn",
}
JSON = "application/json"


def what(body: bytes, content_type: str | None = JSON) -> str:
    got = read_reply(body, content_type, messages_reply)
    assert isinstance(got, NotAReply)
    return got.what


def test_a_messages_reply_is_read() -> None:
    assert read_reply(json.dumps(REPLY).encode(), JSON, messages_reply) == REPLY
    charset = "application/json; charset=utf-8"
    assert read_reply(json.dumps(REPLY).encode(), charset, messages_reply) == REPLY
    # the fields a compatible server may leave out are not required; content is
    assert read_reply(b'{"content": []}', "application/vnd.api+json", messages_reply) == {
        "content": []
    }


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        (b"", JSON, "an empty body"),
        (b"  \n", JSON, "an empty body"),
        (
            b"<!DOCTYPE html><html><head><title> 502 Bad\n Gateway </title></head></html>",
            "text/html; charset=utf-8",
            "an HTML page titled '502 Bad Gateway'",
        ),
        (b"<html><body>sign in</body></html>", JSON, "an HTML page"),  # whatever it says
        (b'{"content": []}', "text/plain", "a text/plain body"),
        (b'{"content": []}', "text/event-stream", "a text/event-stream body"),
        (b'{"content": []}', None, "a body without a content type"),
        (b"\x00\x9f garbage", JSON, "bytes that are not JSON ('?? garbage')"),
        (b"[1, 2]", JSON, "JSON that is not an object (list)"),
        (b'{"object": "chat.completion", "choices": []}', JSON, "JSON with no content list"),
        (b'{"type": "error", "error": {}}', JSON, "JSON with type 'error'"),
        (b'{"content": [{"text": "x"}]}', JSON, "JSON with a content block without a type"),
        (b'{"content": [], "role": "user"}', JSON, "JSON with role 'user'"),
    ],
)
def test_what_is_not_a_reply_says_what_it_is(
    body: bytes, content_type: str | None, expected: str
) -> None:
    assert what(body, content_type) == expected


def test_a_long_preview_is_cut_and_stays_one_line() -> None:
    said = what(b"not json\n" * 20)
    assert said == "bytes that are not JSON ('not json?not json?not json?not json?not ...')"


def test_a_model_description_of_either_api_shape_is_read() -> None:
    anthropic = {"type": "model", "id": "claude-test", "display_name": "Claude"}
    openai = {"object": "model", "id": "qwen2.5:7b", "owned_by": "library"}
    for data in (anthropic, openai):
        assert read_reply(json.dumps(data).encode(), JSON, model_description) == data
    assert model_description({"type": "model"}) == "no model id"
    assert model_description({"type": "error", "id": "x"}) == "type 'error'"


@pytest.mark.parametrize(
    ("status", "for_good"),
    [(400, True), (402, True), (404, True), (405, True), (413, True), (422, True),
     (408, False), (409, False), (429, False), (500, False), (529, False), (200, False)],
)  # fmt: skip
def test_a_4xx_is_refused_for_good_unless_a_retry_may_cure_it(status: int, for_good: bool) -> None:
    assert refused_for_good(status) is for_good
