"""A fake model behind the fake Messages API: it reads the request errorflow sends and
answers as a plain tool-using agent would, so whole runs go through the real SDK.

- With tools and no tool result yet: it calls, for each need the task names a tool and
  argument for, that tool (`- key "papers": ... (tool search_papers, argument query =
  transformer attention)`).
- Otherwise it submits: each need's value from its tool result when the result is ok;
  without tools, the upstream agent's claims, or, when the upstream reported a failure,
  an abstention flagged upstream_error, except that with probability `fabricate` it
  writes a confident made-up value instead (a model's sampling: two runs differ unless
  their replies are cached or replayed).

Usage is counted as errorflow's estimator counts (errorflow/models/token_estimate.py),
and a prompt cache is played: the first request with a given cached prefix (tools and
system marked `cache_control`) writes it, later ones read it.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from typing import Any

from errorflow.models.token_estimate import TOOL_PROMPT_TOKENS, output_tokens, tokens_of
from tests.fake_anthropic import Received, Reply, message, tool_use

NEED = re.compile(r'^- key "([^"]+)": .*?\(tool (\S+), argument (\w+) = (.+)\)$')
UPSTREAM = re.compile(r"^Message from upstream agent '[^']*':\n(.*)$", re.S)


def _texts(body: dict[str, Any]) -> list[str]:
    out = []
    for m in body.get("messages", []):
        for block in m["content"] if isinstance(m["content"], list) else []:
            if block.get("type") == "text":
                out.append(block["text"])
    return out


def _results(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = {}
    for m in body.get("messages", []):
        for block in m["content"] if isinstance(m["content"], list) else []:
            if block.get("type") == "tool_result":
                found[block["tool_use_id"]] = json.loads(block["content"])
    return found


def _needs(body: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    texts = _texts(body)
    lines = texts[0].splitlines() if texts else []
    return [m.groups() for line in lines if (m := NEED.match(line))]  # type: ignore[misc]


class FakeModel:
    def __init__(
        self, fabricate: float = 0.0, seed: int | None = None, delay_s: float = 0.0
    ) -> None:
        self.fabricate = fabricate
        self.delay_s = delay_s  # each reply takes this long (requests overlap)
        self.rng = random.Random(seed)
        self.cached: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, got: Received) -> Reply:
        body = got.body
        tools = [t["name"] for t in body.get("tools", []) if t["name"] != "submit_answer"]
        results = _results(body)
        calls = [n for n in _needs(body) if n[1] in tools]
        if calls and not results:
            content = [
                tool_use(f"toolu_{i}", tool, {arg: value})
                for i, (_, tool, arg, value) in enumerate(calls)
            ]
            return self._reply(body, content, "tool_use")
        answer = self._answer(body, calls, results)
        return self._reply(body, [tool_use("toolu_final", "submit_answer", answer)], "tool_use")

    def _answer(
        self, body: dict[str, Any], calls: list[Any], results: dict[str, dict[str, Any]]
    ) -> dict[str, Any]:
        if calls:
            claims, unresolved = [], []
            for i, (key, *_rest) in enumerate(calls):
                result = results.get(f"toolu_{i}", {})
                if result.get("ok"):
                    value = result.get("result", result.get("data"))
                    claims.append({"key": key, "value": value, "certain": True})
                else:
                    unresolved.append(key)
            flags = ["tool_error"] if unresolved else []
            return {"claims": claims, "abstained": not claims, "flags": flags,
                    "unresolved": unresolved}  # fmt: skip
        return self._from_upstream(body)

    def _from_upstream(self, body: dict[str, Any]) -> dict[str, Any]:
        views = [json.loads(m.group(1)) for t in _texts(body) if (m := UPSTREAM.match(t))]
        failed = [v for v in views if v["status"] != "ok" or v["errors"]]
        claims = [c for v in views for c in v["answer"]["claims"]]
        if not failed:
            return {"claims": claims, "abstained": False}
        with self.lock:
            fabricates = self.rng.random() < self.fabricate
        if fabricates:
            keys = {c["key"] for c in claims}
            keys |= {k for v in views for k in v["answer"]["unresolved"]}
            made_up = [{"key": k, "value": ["made up"], "certain": True} for k in sorted(keys)]
            return {"claims": made_up, "abstained": False}
        return {"claims": [], "abstained": True, "flags": ["upstream_error"]}

    def _reply(self, body: dict[str, Any], content: list[dict[str, Any]], stop: str) -> Reply:
        reply = message(content, stop)
        reply["usage"] = self._usage(body, content)
        return Reply(200, reply, delay_s=self.delay_s)

    def _usage(self, body: dict[str, Any], content: list[dict[str, Any]]) -> dict[str, int]:
        total = tokens_of({k: body[k] for k in ("system", "messages", "tools") if k in body})
        total += TOOL_PROMPT_TOKENS if body.get("tools") else 0
        usage = {"input_tokens": total, "output_tokens": output_tokens(content)}
        system = body.get("system")
        if isinstance(system, list) and system and system[-1].get("cache_control"):
            prefix = {"tools": body.get("tools"), "system": system}
            size = tokens_of(prefix)
            digest = hashlib.sha256(json.dumps(prefix, sort_keys=True).encode()).hexdigest()
            with self.lock:
                seen = digest in self.cached
                self.cached.add(digest)
            usage["input_tokens"] = total - size
            usage["cache_read_input_tokens" if seen else "cache_creation_input_tokens"] = size
        return usage
