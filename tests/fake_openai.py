"""A scripted stand-in for an OpenAI-compatible Chat Completions server on 127.0.0.1.

The machinery of tests/fake_anthropic.py (a real HTTP server in a thread, scripted
`Reply`s, recorded requests, `respond=`, `api_key=`, `models=`, `stop_after=`,
`serves_models=`, `lookup=`, `rate_limit=`, `burst_429()`, `one_at_a_time=`), answering
as OpenAI does:
`url` is the base_url the SDK gets (it ends in `/v1`), refusals and 429s carry OpenAI's
error objects, and a server with a rate limit sends the `x-ratelimit-*` headers on every
reply. `completion()` and `tool_call()` build replies; `GARBAGE` holds one of each kind of
answer that is not a Chat Completions reply.

`ChatModel` is the fake model of tests/fake_model.py behind this API: it reads the
Chat Completions request as the Messages one it would have been, answers as that model
does, and reports a prompt cache as OpenAI does (`prompt_tokens_details.cached_tokens`:
the system message and the tools, from the second request that repeats them).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from datetime import datetime
from typing import Any

from errorflow.models.token_estimate import TOOL_PROMPT_TOKENS, output_tokens, tokens_of
from tests.fake_anthropic import FakeAnthropic, Received, Reply, message, text
from tests.fake_model import FakeModel


def tool_call(id_: str, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": args}}


def completion(
    tool_calls: list[dict[str, Any]] | None = None,
    content: str | None = None,
    finish_reason: str | None = "tool_calls",
    *,
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
    cached_tokens: int | None = None,
    model: str = "gpt-test",
) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": msg, "finish_reason": finish_reason}],
        "usage": usage,
    }


def openai_error(err_type: str, msg: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": msg, "type": err_type, "param": None, "code": code}}


#: Answers that are not Chat Completions replies, by kind: the server's fault, never the model's.
GARBAGE: dict[str, Reply] = {
    "non-JSON bytes": Reply(200, b"\x00\x9f\xff garbage {{", content_type="application/json"),
    "an HTML page": Reply(
        200,
        "<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head>"
        "<body><h1>Bad Gateway</h1></body></html>",
        content_type="text/html; charset=utf-8",
    ),
    "an empty body": Reply(200, ""),
    "JSON of another API": Reply(200, message([text("hi")])),
    "an unexpected content type": Reply(200, json.dumps(completion()), content_type="text/plain"),
}


class FakeOpenAI(FakeAnthropic):
    """Use as a context manager; `url` is the base_url to give the SDK."""

    def _refusal(self, got: Received, model: object) -> Reply | None:
        refused = super()._refusal(got, model)
        if refused is None:
            return None
        if refused.status == 401:
            body = openai_error(
                "invalid_request_error", "Incorrect API key provided", "invalid_api_key"
            )
        else:
            body = openai_error(
                "invalid_request_error", f"The model `{model}` does not exist", "model_not_found"
            )
        return Reply(refused.status, body)

    def _limited(self) -> Reply | None:
        limited = super()._limited()
        if limited is None:
            return None
        body = openai_error("requests", "Rate limit reached for requests", "rate_limit_exceeded")
        return Reply(429, body, headers=limited.headers)

    def _limit_headers(self) -> dict[str, str]:
        """OpenAI's `x-ratelimit-*-requests` headers of a server with a limit."""
        headers = super()._limit_headers()
        if not headers:
            return {}
        reset = datetime.fromisoformat(headers["anthropic-ratelimit-requests-reset"])
        reset_s = max(0.0, reset.timestamp() - time.time())
        return {
            "x-ratelimit-limit-requests": headers["anthropic-ratelimit-requests-limit"],
            "x-ratelimit-remaining-requests": headers["anthropic-ratelimit-requests-remaining"],
            "x-ratelimit-reset-requests": f"{reset_s:.3f}s",
        }

    @property
    def url(self) -> str:
        return f"{super().url}/v1"


# -- a fake model --------------------------------------------------------------------


def _as_messages_body(body: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions request body as the Messages one it renders the same turns as."""
    messages: list[dict[str, Any]] = []
    for m in body.get("messages", []):
        role = m["role"]
        if role == "system":
            continue
        if role == "tool":
            content = json.loads(m["content"])
            block = {
                "type": "tool_result",
                "tool_use_id": m["tool_call_id"],
                "content": json.dumps(content),
            }
            messages.append({"role": "user", "content": [block]})
        elif role == "assistant":
            blocks = [
                {
                    "type": "tool_use",
                    "id": c["id"],
                    "name": c["function"]["name"],
                    "input": json.loads(c["function"]["arguments"]),
                }
                for c in m.get("tool_calls", [])
            ]
            messages.append({"role": "assistant", "content": blocks})
        else:  # the task and the upstream messages, merged into one message: apart again
            parts = re.split(r"\n\n(?=Message from upstream agent )", m["content"])
            messages.append({"role": "user", "content": [text(p) for p in parts]})
    tools = [{"name": t["function"]["name"]} for t in body.get("tools", [])]
    return {"messages": messages, "tools": tools}


class ChatModel(FakeModel):
    def __call__(self, got: Received) -> Reply:
        as_messages = Received(got.method, got.path, got.headers, _as_messages_body(got.body))
        reply = super().__call__(as_messages)
        blocks = reply.body["content"]
        calls = [tool_call(b["id"], b["name"], b["input"]) for b in blocks]
        body = completion(calls, None, "tool_calls", **self._chat_usage(got.body, blocks))
        return Reply(200, body, delay_s=reply.delay_s)

    def _chat_usage(self, body: dict[str, Any], blocks: list[Any]) -> dict[str, int]:
        total = tokens_of({k: body[k] for k in ("messages", "tools") if k in body})
        total += TOOL_PROMPT_TOKENS if body.get("tools") else 0
        prefix = {"system": body["messages"][0], "tools": body.get("tools")}
        digest = hashlib.sha256(json.dumps(prefix, sort_keys=True).encode()).hexdigest()
        with self.lock:
            seen = digest in self.cached
            self.cached.add(digest)
        return {
            "prompt_tokens": total,
            "completion_tokens": output_tokens(blocks),
            "cached_tokens": tokens_of(prefix) if seen else 0,
        }
