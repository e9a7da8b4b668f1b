"""Whether what a model server sent back is an answer of the API it speaks at all.

A model's own behaviour (a refusal, prose instead of a tool call, a malformed call)
arrives inside a well-formed reply: that is the experiment, and the backend parses it.
Anything else says the server, or the address it was given, is wrong; a trial that got
it measured nothing and is an infrastructure fault:

- a 200 whose body is not the API's reply: empty, an HTML page (a proxy's, a web app's),
  a content type other than JSON, bytes that are not JSON, JSON of another shape (each
  API names, as a `Shape`, what its replies always carry);
- a request refused for good: a 4xx other than 408, 409 and 429 (a retry or the rate
  limiter may cure those). The same request would be refused again whatever the model
  would have said.

A 5xx (529 overloaded included) is load, retried by the policy layer as the
experiment's own failure, and is not judged here.

Pure: a status, a content type and bytes in; the reply, or words saying what came
instead (`NotAReply.what`, to follow "answered"), out. Every backend (Anthropic
Messages, an OpenAI-compatible chat API) uses it with its own `Shape`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from errorflow.protocol.envelope import JsonObject

#: What a JSON object lacks to be a reply of one API, in words ("no content list"), or
#: None when it is one.
Shape = Callable[[JsonObject], str | None]

#: Failed requests that a later attempt may see succeed: timeout, conflict, rate limit.
_RETRIED_4XX = frozenset({408, 409, 429})
_PREVIEW = 40
_HTML_START = re.compile(rb"^\s*<(!doctype\s+html|html|head|body)\b", re.IGNORECASE)
_TITLE = re.compile(rb"<title[^>]*>(.*?)</title", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class NotAReply:
    """A body that is not the API's reply: `what` came instead ("an HTML page")."""

    what: str


def refused_for_good(status: int) -> bool:
    """A 4xx that no retry cures: the server refuses this request as it is."""
    return 400 <= status < 500 and status not in _RETRIED_4XX


def read_reply(body: bytes, content_type: str | None, shape: Shape) -> JsonObject | NotAReply:
    """A 200's body as the API's reply, or what it is instead."""
    if not body.strip():
        return NotAReply("an empty body")
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media == "text/html" or _HTML_START.match(body):
        return NotAReply(_html(body))
    if not (media == "application/json" or media.endswith("+json")):
        return NotAReply(f"a {media} body" if media else "a body without a content type")
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return NotAReply(f"bytes that are not JSON ({_preview(body)})")
    if not isinstance(data, dict):
        return NotAReply(f"JSON that is not an object ({type(data).__name__})")
    defect = shape(data)
    return data if defect is None else NotAReply(f"JSON with {defect}")


def messages_reply(data: JsonObject) -> str | None:
    """The shape of an Anthropic Messages API reply: a `content` list of typed blocks
    (and, where given, type "message" and role "assistant")."""
    kind = data.get("type", "message")
    if kind != "message":
        return f"type {_short(kind)}"
    content = data.get("content")
    if not isinstance(content, list):
        return "no content list"
    if not all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in content):
        return "a content block without a type"
    role = data.get("role", "assistant")
    return None if role == "assistant" else f"role {_short(role)}"


def chat_completion(data: JsonObject) -> str | None:
    """The shape of an OpenAI Chat Completions reply: a non-empty `choices` list whose
    first choice has a `message` object (and, where given, object "chat.completion" and
    role "assistant")."""
    kind = data.get("object", "chat.completion")
    if kind != "chat.completion":
        return f"object {_short(kind)}"
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        return "no choices list"
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        return "a choice without a message"
    role = message.get("role", "assistant")
    return None if role == "assistant" else f"role {_short(role)}"


def model_description(data: JsonObject) -> str | None:
    """The shape of `GET /v1/models/{id}`'s answer: an `id` (Anthropic's shape and the
    OpenAI one both have it), and, where given, type "model"."""
    kind = data.get("type", "model")
    if kind != "model":
        return f"type {_short(kind)}"
    return None if isinstance(data.get("id"), str) else "no model id"


def _html(body: bytes) -> str:
    title = _TITLE.search(body[:4096])
    if title is None:
        return "an HTML page"
    words = " ".join(title.group(1).decode("utf-8", "replace").split())
    return f"an HTML page titled {_short(words)}" if words else "an HTML page"


def _preview(body: bytes) -> str:
    shown = _printable(body[:_PREVIEW].decode("utf-8", "replace"))
    return repr(shown + ("..." if len(body) > _PREVIEW else ""))


def _short(value: object) -> str:
    text = _printable(value if isinstance(value, str) else json.dumps(value, default=str))
    return repr(text if len(text) <= _PREVIEW else text[: _PREVIEW - 3] + "...")


def _printable(text: str) -> str:
    """One line of what a person can read: control and undecodable bytes become "?"."""
    return "".join(c if c.isprintable() and c != "\ufffd" else "?" for c in text)
