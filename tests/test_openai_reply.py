"""A Chat Completions reply as a ModelResponse, and the shape that tells it from garbage."""

from __future__ import annotations

import pytest
from fake_openai import completion, tool_call

from errorflow.models.anthropic.request import SUBMIT_TOOL
from errorflow.models.openai.reply import UnusableReply, parse_completion, reply_usage
from errorflow.models.server_reply import chat_completion


def test_calls_keep_their_ids_and_names_map_back() -> None:
    reply = completion(
        [tool_call("c1", "metrics_query", {"name": "cpu"}), tool_call("", "other", {})]
    )
    resp = parse_completion(reply, {"metrics_query": "metrics.query"})
    assert [(c.id, c.name, c.arguments) for c in resp.calls] == [
        ("c1", "metrics.query", {"name": "cpu"}),
        ("call_1", "other", {}),
    ]
    assert resp.final is None and resp.stop_reason == "tool_calls"


def test_arguments_that_are_not_a_json_object_are_kept_as_text() -> None:
    reply = completion([tool_call("c", "t", '{"a": 1'), tool_call("d", "t", "[1, 2]")])
    assert [c.arguments for c in parse_completion(reply).calls] == ['{"a": 1', "[1, 2]"]


def test_the_answer_wins_over_other_calls_and_a_malformed_one_is_flagged() -> None:
    answer = {"claims": [{"key": "k", "value": 3}], "abstained": False, "text": "t"}
    both = completion([tool_call("a", "t", {}), tool_call("b", SUBMIT_TOOL, answer)])
    final = parse_completion(both).final
    assert final is not None and final.claims[0].value == 3 and final.text == "t"
    broken = parse_completion(completion([tool_call("b", SUBMIT_TOOL, "not json")])).final
    assert broken is not None and broken.flags == ["malformed_answer"]


def test_content_as_text_parts_is_read() -> None:
    reply = completion(None, None, "stop")
    reply["choices"][0]["message"]["content"] = [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b"},
    ]
    final = parse_completion(reply).final
    assert final is not None and final.text == "a\n\nb"


@pytest.mark.parametrize(
    ("finish", "refusal", "flag"),
    [("content_filter", None, "content_filter"), ("stop", "I can't", "refusal")],
)
def test_a_filtered_or_refused_reply_abstains(finish: str, refusal: str | None, flag: str) -> None:
    reply = completion(None, None, finish)
    reply["choices"][0]["message"]["refusal"] = refusal
    final = parse_completion(reply).final
    assert final is not None and final.abstained and final.flags == [flag]


def test_a_cut_reply_without_a_whole_answer_is_unusable() -> None:
    with pytest.raises(UnusableReply, match=r"^length: the reply was cut off"):
        parse_completion(completion([tool_call("x", "t", '{"q": "')], None, "length"))


def test_usage_counts_the_cache_share_of_the_input() -> None:
    usage = reply_usage(completion(prompt_tokens=100, completion_tokens=7, cached_tokens=64))
    assert (usage.input_tokens, usage.output_tokens) == (100, 7)
    assert (usage.cache_read_tokens, usage.uncached_input_tokens) == (64, 36)
    assert reply_usage({}).input_tokens == 0


@pytest.mark.parametrize(
    ("data", "defect"),
    [
        (completion(), None),
        ({"choices": [{"message": {"content": "hi"}}]}, None),  # the optional fields absent
        ({"object": "list", "data": []}, "object 'list'"),
        ({"type": "message", "content": []}, "no choices list"),
        ({"choices": []}, "no choices list"),
        ({"choices": [{"text": "hi"}]}, "a choice without a message"),
        ({"choices": [{"message": {"role": "user"}}]}, "role 'user'"),
        ({"error": {"message": "boom"}}, "no choices list"),
    ],
)
def test_the_shape_of_a_chat_completion(data: dict[str, object], defect: str | None) -> None:
    assert chat_completion(data) == defect
