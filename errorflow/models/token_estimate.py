"""How many tokens a Messages API request or reply is, before a server counts them.

One rule for every place that must guess before the server answers: the rate limiter
(what a request will take of a tokens-per-minute budget), the dry run (what a run will
cost) and the test server (what it reports as usage). Real tokenizers differ; JSON and
code take more tokens per character than prose, so the rule leans high (3.5 characters a
token, not the 4 usually quoted for English) and adds the system prompt the API itself
puts in front of a request that carries tools.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

#: Characters a token, for text of the kind errorflow sends (prose, JSON, schemas).
CHARS_PER_TOKEN = 3.5

#: What the Messages API adds to a request with tools (its tool-use system prompt:
#: 346 tokens for `tool_choice` auto on current Claude models, per Anthropic's pricing
#: page; rounded up).
TOOL_PROMPT_TOKENS = 350

#: The parts of a request body a model reads (model name, max_tokens and sampling
#: parameters are not input).
INPUT_PARTS = ("system", "messages", "tools")


def tokens_of_text(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def tokens_of(value: object) -> int:
    """The tokens of a JSON value, as its compact JSON text."""
    return tokens_of_text(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def input_tokens(body: Mapping[str, object]) -> int:
    """The input tokens of a Messages API request body."""
    parts = {k: body[k] for k in INPUT_PARTS if k in body}
    return tokens_of(parts) + (TOOL_PROMPT_TOKENS if body.get("tools") else 0)


def output_tokens(content: object) -> int:
    """The output tokens of a reply's content blocks."""
    return max(1, tokens_of(content))
