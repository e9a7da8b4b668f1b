"""A scripted OpenAI-compatible server whose behaviour probabilities are set: it reads a
Chat Completions request as a model would (the task's need lines, the last tool result,
the upstream messages) and answers with tool calls, deciding each behaviour by one draw
against its probability. It knows nothing of errorflow's probes: it answers any
conversation errorflow renders (errorflow/models/openai/render.py).

Draws are seeded by the request itself (a hash of its body, how many times that body
came before, and the server's seed), so the same requests get the same answers in
whatever order they arrive.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

NEED = re.compile(r'^- key "([^"]+)": (.*?)(?: \(tool (\S+), argument (\w+) = (.+)\))?$')
UPSTREAM = re.compile(
    r"Message from upstream agent '([^']*)':\n(\{.*?\})(?=\n\nMessage from|\Z)", re.S
)
SUBMIT = "submit_answer"


@dataclass
class Behaviour:
    """The probability of each behaviour (names as the simulated model's parameters)."""

    retry_transient: float = 0.3
    use_wording: float = 0.7
    drop_arg: float = 0.1
    unknown_tool: float = 0.1
    repair_with_options: float = 0.5
    repair_without_options: float = 0.4
    repair_missing: float = 0.8
    flag_empty: float = 0.3
    fabricate_on_empty: float = 0.6
    fabricate_on_missing: float = 0.4
    heed_upstream: float = 0.9
    keep_own: float = 0.6
    seed: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)


def _call(name: str, args: dict[str, Any], n: int = 0) -> dict[str, Any]:
    return {"id": f"call_{n}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}  # fmt: skip


def _reply(calls: list[dict[str, Any]]) -> dict[str, Any]:
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    return {
        "id": "chatcmpl-b", "object": "chat.completion", "created": 1, "model": "behaviour",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }  # fmt: skip


def _submit(claims: list[dict[str, Any]], **rest: Any) -> dict[str, Any]:
    answer = {"claims": claims, "abstained": False, "flags": [], "unresolved": [], **rest}
    return _reply([_call(SUBMIT, answer)])


def _needs(text: str) -> list[tuple[str, str, str | None, str | None, str | None]]:
    return [m.groups() for line in text.splitlines() if (m := NEED.match(line))]  # type: ignore[misc]


def _overlap(a: str, b: str) -> int:
    return len(set(re.split(r"[^0-9a-z]+", a.lower())) & set(re.split(r"[^0-9a-z]+", b.lower())))


class Model:
    def __init__(self, b: Behaviour, body: dict[str, Any], repeat: int = 0) -> None:
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        self.b, self.body = b, body
        self.rng = random.Random(f"{b.seed}:{digest}:{repeat}")
        self.messages = body["messages"]
        self.tools = [t["function"]["name"] for t in body.get("tools", [])
                      if t["function"]["name"] != SUBMIT]  # fmt: skip
        users = [m["content"] for m in self.messages if m["role"] == "user"]
        self.text = "\n\n".join(users)
        self.needs = _needs(self.text)

    def p(self, prob: float) -> bool:
        return self.rng.random() < prob

    def answer(self) -> dict[str, Any]:
        last = self.messages[-1]
        if last["role"] == "tool":
            return self._after_tool(json.loads(last["content"]))
        if self.tools:
            return self._first_call()
        return self._write()

    def _first_call(self) -> dict[str, Any]:
        _, wording, tool, arg, value = self.needs[0]
        name = tool or self.tools[0]
        params = self.body["tools"][0]["function"]["parameters"]
        arg = arg or params["required"][0]
        chosen = value or (wording if self.p(self.b.use_wording) else "guessed_id")
        args = {} if self.p(self.b.drop_arg) else {arg: chosen}
        if self.p(self.b.unknown_tool):
            name += "_v2"
        return _reply([_call(name, args)])

    def _previous_call(self) -> dict[str, Any]:
        assistant = [m for m in self.messages if m["role"] == "assistant"][-1]
        return assistant["tool_calls"][-1]["function"]

    def _after_tool(self, result: dict[str, Any]) -> dict[str, Any]:
        key, wording, _, arg, value = self.needs[0]
        call = self._previous_call()
        tool, args = call["name"], json.loads(call["arguments"])
        code = result.get("code")
        if result.get("ok"):
            if result.get("result") in (None, [], {}, ""):
                if self.p(self.b.flag_empty):
                    return _submit([{"key": key, "value": None, "certain": False}],
                                   flags=["empty_result"])  # fmt: skip
                return _submit([{"key": key, "value": result.get("result"), "certain": True}])
            return _submit([{"key": key, "value": result.get("result"), "certain": True}])
        give_up = _submit([], unresolved=[key], flags=["tool_error"])
        if code in ("transient", "timeout", "rate_limit"):
            return _reply([_call(tool, args)]) if self.p(self.b.retry_transient) else give_up
        if code == "invalid_args":
            field_ = result.get("field") or arg
            if result.get("received") is None:
                ok = self.p(self.b.repair_missing)
                return _reply([_call(tool, {field_: value})]) if ok else give_up
            options = result.get("options")
            if options:
                if self.p(self.b.repair_with_options):
                    best = max(options, key=lambda o: _overlap(o, wording))
                    return _reply([_call(tool, {field_: best})])
                return give_up
            if value and self.p(self.b.repair_without_options):
                return _reply([_call(tool, {field_: value})])
            return give_up
        return give_up

    def _upstream(self) -> list[tuple[str, dict[str, Any]]]:
        return [(s, json.loads(j)) for s, j in UPSTREAM.findall(self.text)]

    def _write(self) -> dict[str, Any]:
        ups = self._upstream()
        stated: dict[str, list[Any]] = {}
        for _, msg in ups:
            for c in msg["answer"]["claims"]:
                stated.setdefault(c["key"], []).append(c["value"])
        disputed = {k: v for k, v in stated.items() if len({json.dumps(x) for x in v}) > 1}
        if disputed:  # a discussion: its own value is the one only one message states
            claims = []
            for k, values in stated.items():
                own = next(v for v in values if values.count(v) == 1)
                majority = max(values, key=values.count)
                claims.append({"key": k, "value": own if self.p(self.b.keep_own) else majority,
                               "certain": True})  # fmt: skip
            return _submit(claims)
        troubled = any(m["status"] != "ok" or m["errors"] or m["confidence"] < 0.5 for _, m in ups)
        heed = troubled and self.p(self.b.heed_upstream)
        claims, unresolved = [], []
        for key, *_ in self.needs:
            values = stated.get(key)
            if values and values[0] not in (None, [], {}, ""):
                claims.append({"key": key, "value": values[0], "certain": True})
            elif heed:
                unresolved.append(key)
            elif values is None:
                if self.p(self.b.fabricate_on_missing):
                    claims.append({"key": key, "value": 4242.0, "certain": True})
                else:
                    unresolved.append(key)
            elif self.p(self.b.fabricate_on_empty):
                claims.append({"key": key, "value": 4242.0, "certain": True})
            else:
                claims.append({"key": key, "value": values[0], "certain": True})
        flags = ["upstream_error"] if heed else []
        return _submit(claims, unresolved=unresolved, flags=flags)


class BehaviourServer:
    """`with BehaviourServer(Behaviour(...)) as s:` serves on `s.url` (base_url, `/v1`)."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.lock = threading.Lock()
        self.seen: dict[str, int] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, doc: dict[str, Any]) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                model = {"id": "behaviour", "object": "model", "created": 1, "owned_by": "t"}
                listed = {"object": "list", "data": [model]}
                self._send(200, model if self.path.startswith("/v1/models/") else listed)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                with outer.lock:
                    outer.behaviour.requests.append(body)
                    digest = json.dumps(body, sort_keys=True)
                    repeat = outer.seen.get(digest, 0)
                    outer.seen[digest] = repeat + 1
                self._send(200, Model(outer.behaviour, body, repeat).answer())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> BehaviourServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
