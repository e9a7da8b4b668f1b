"""A scripted stand-in for the Anthropic Messages API on 127.0.0.1.

A real HTTP server (stdlib ThreadingHTTPServer on port 0, in a background thread)
answers each request with the next scripted reply and records what it received, so
tests drive the real SDK over a real socket.

It also serves `GET /v1/models/{id}` (the check a run makes before its first trial,
recorded in `lookups`, not `received`) and can misbehave as a broken infrastructure
would: `api_key=` refuses every other key (401), `models=` knows only those models (404
for the rest, on lookups and messages alike), and `stop_after=` stops listening after
that many messages were answered (connection refused from then on), and
`serves_models=False` plays a proxy without the models endpoint, `lookup=` is what the
models endpoint answers instead. `unused_url()` is a server nobody listens on.

A `Reply` can be what no Messages API sends: bytes or text as they are, under any
`content_type`, or `hang=True`, a request read and never answered (until the server
stops), or `trickle_s=`, a body written a byte at a time (each read soon, the whole
late). `GARBAGE` holds one of each kind of answer that is not a Messages API reply.

For whole runs: `respond=` answers every request without a scripted reply (a fake
model: tests/fake_model.py); `rate_limits=` (requests a window) answers 429 with
`retry-after` past the limit and sends the `anthropic-ratelimit-*` headers on every
reply; `burst_429()` refuses the next N requests; `in_flight` / `peak_in_flight` count
requests being answered at once; `one_at_a_time=True` answers them one by one, as
llama.cpp's server does, each to its end even when its client has gone; `props=` is what
its `GET /props` answers (404 without: other servers have no such route).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # a dict or list is sent as JSON, a str or bytes as they are
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    content_type: str = "application/json"
    hang: bool = False  # read the request, never answer it
    trickle_s: float = 0.0  # the body written a byte at a time, this long between bytes


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any


def message(
    content: list[dict[str, Any]],
    stop_reason: str | None = "end_turn",
    *,
    input_tokens: int = 10,
    output_tokens: int = 5,
    model: str = "claude-test",
) -> dict[str, Any]:
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def tool_use(id_: str, name: str, input_: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": id_, "name": name, "input": input_}


def error_body(err_type: str, msg: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": err_type, "message": msg}}


def model_info(model: str) -> dict[str, Any]:
    """What `GET /v1/models/{id}` answers for a model the server has."""
    return {
        "type": "model",
        "id": model,
        "display_name": model,
        "created_at": "2025-01-01T00:00:00Z",
    }


#: Answers that are not Messages API replies, by kind: the server's fault, never the model's.
GARBAGE: dict[str, Reply] = {
    "non-JSON bytes": Reply(200, b"\x00\x9f\xff garbage {{", content_type="application/json"),
    "an HTML page": Reply(
        200,
        "<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head>"
        "<body><h1>Bad Gateway</h1></body></html>",
        content_type="text/html; charset=utf-8",
    ),
    "an empty body": Reply(200, ""),
    "JSON of another API": Reply(
        200, {"object": "chat.completion", "choices": [{"message": {"content": "hi"}}]}
    ),
    "an unexpected content type": Reply(
        200, json.dumps(message([text("fine")])), content_type="text/plain"
    ),
}


def unused_url() -> str:
    """The base_url of a port nobody listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # a burst of a whole run's requests is queued, not reset


def _credential(headers: dict[str, str]) -> str:
    if "x-api-key" in headers:
        return headers["x-api-key"]
    return headers.get("authorization", "").removeprefix("Bearer ")


class FakeAnthropic:
    """Use as a context manager; `url` is the base_url to give the SDK."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        models: Collection[str] | None = None,
        stop_after: int | None = None,
        serves_models: bool = True,
        respond: Callable[[Received], Reply] | None = None,
        rate_limit: int | None = None,
        window_s: float = 60.0,
        lookup: Reply | None = None,
        one_at_a_time: bool = False,
        props: dict[str, Any] | None = None,
    ) -> None:
        self.replies: list[Reply] = []
        self.received: list[Received] = []
        self.lookups: list[Received] = []  # GET /v1/models/{id}
        self.api_key = api_key  # None: any key is accepted
        self.models = None if models is None else set(models)  # None: every model exists
        self.stop_after = stop_after  # messages answered before the server goes away
        self.answered = 0
        self.serves_models = serves_models  # False: a proxy without the models endpoint
        self.lookup = lookup  # what the models endpoint answers (None: the model's info)
        self.stopped = threading.Event()
        self._lock = threading.Lock()
        self.respond = respond
        self.rate_limit = rate_limit  # requests a window before 429s (None: no limit)
        self.window_s = window_s
        self._window: list[float] = []  # when the requests of the current window came
        self._refuse = 0  # the next N requests answer 429 (`burst_429`)
        self._refuse_after = "0.02"
        self.refused = 0  # 429s answered
        self.in_flight = 0
        self.peak_in_flight = 0
        # llama.cpp's server: one request at a time, each to its end (a reply whose client
        # gave up included), the others queued behind it
        self.one_at_a_time = one_at_a_time
        self._turn = threading.Lock()
        # llama.cpp's `GET /props` (its `total_slots`); None: 404, as other servers answer
        self.props = props
        self.props_asked: list[Received] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # silence stderr
                pass

            def _received(self, method: str) -> Received:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                headers = {k.lower(): v for k, v in self.headers.items()}
                return Received(method=method, path=self.path, headers=headers, body=body)

            def do_GET(self) -> None:
                if fake.stopped.is_set():  # going away: drop the connection unanswered
                    return
                got = self._received("GET")
                if self.path.split("?")[0].rstrip("/").endswith("/props"):
                    fake.props_asked.append(got)
                    props = fake.props
                    missing = error_body("not_found_error", f"no route {self.path}")
                    self._send(Reply(404, missing) if props is None else Reply(200, props))
                    return
                with fake._lock:
                    fake.lookups.append(got)
                model = self.path.split("?")[0].rstrip("/").rsplit("/", 1)[-1]
                reply = fake._refusal(got, model) or Reply(200, model_info(model))
                if not fake.serves_models:
                    reply = Reply(404, error_body("not_found_error", f"no route {self.path}"))
                elif fake.lookup is not None:
                    reply = fake.lookup
                self._send(reply)

            def do_POST(self) -> None:
                if not fake.one_at_a_time:
                    self._post()
                    return
                with fake._turn:
                    self._post()

            def _post(self) -> None:
                if fake.stopped.is_set():  # going away: drop the connection unanswered
                    return
                got = self._received("POST")
                model = got.body.get("model") if isinstance(got.body, dict) else None
                with fake._lock:
                    fake.received.append(got)
                    fake.in_flight += 1
                    fake.peak_in_flight = max(fake.peak_in_flight, fake.in_flight)
                    reply = fake._refusal(got, model) or fake._limited()
                    scripted = reply is None and bool(fake.replies)
                    if reply is None and scripted:
                        reply = fake.replies.pop(0)
                    fake.answered += 1
                    last = fake.answered == fake.stop_after
                    if last:  # set before answering: the next request finds it gone
                        fake.stopped.set()
                if reply is None:  # answered outside the lock: concurrent requests overlap
                    reply = (
                        fake.respond(got)
                        if fake.respond is not None
                        else Reply(500, error_body("api_error", "no scripted reply left"))
                    )
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.hang:  # until the server stops; the connection closes unanswered
                    fake.stopped.wait()
                with fake._lock:
                    fake.in_flight -= 1
                if not reply.hang:
                    self._send(reply)
                if last:
                    threading.Thread(target=fake._go_away, daemon=True).start()

            def _send(self, reply: Reply) -> None:
                body = reply.body
                payload = (
                    body
                    if isinstance(body, bytes)
                    else body.encode()
                    if isinstance(body, str)
                    else json.dumps(body).encode()
                )
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", reply.content_type)
                    self.send_header("content-length", str(len(payload)))
                    self.send_header("request-id", f"req_{len(fake.received)}")
                    for name, value in fake._limit_headers().items():
                        self.send_header(name, value)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    if not reply.trickle_s:
                        self.wfile.write(payload)
                    for byte in payload if reply.trickle_s else b"":
                        self.wfile.write(bytes((byte,)))
                        self.wfile.flush()
                        time.sleep(reply.trickle_s)
                except OSError:  # the client gave up (timeout tests)
                    pass

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._address = self._server.server_address[:2]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def _refusal(self, got: Received, model: object) -> Reply | None:
        """The answer of a server whose infrastructure is wrong for this request."""
        if self.api_key is not None and _credential(got.headers) != self.api_key:
            return Reply(401, error_body("authentication_error", "invalid x-api-key"))
        if self.models is not None and model not in self.models:
            return Reply(404, error_body("not_found_error", f"model: {model}"))
        return None

    def burst_429(self, count: int, retry_after: str = "0.02") -> None:
        """The next `count` requests are answered 429 with this retry-after."""
        with self._lock:
            self._refuse, self._refuse_after = count, retry_after

    def _limited(self) -> Reply | None:
        """A 429 for a request past the burst or the window's limit (called locked)."""
        if self._refuse > 0:
            self._refuse -= 1
            self.refused += 1
            return Reply(429, error_body("rate_limit_error", "burst"),
                         headers={"retry-after": self._refuse_after})  # fmt: skip
        if self.rate_limit is None:
            return None
        now = time.monotonic()
        self._window = [t for t in self._window if now - t < self.window_s]
        if len(self._window) >= self.rate_limit:
            self.refused += 1
            wait = self.window_s - (now - self._window[0])
            return Reply(429, error_body("rate_limit_error", "rate limit"),
                         headers={"retry-after": f"{max(wait, 0.001):.3f}"})  # fmt: skip
        self._window.append(now)
        return None

    def _limit_headers(self) -> dict[str, str]:
        """The `anthropic-ratelimit-requests-*` headers of a server with a limit."""
        if self.rate_limit is None:
            return {}
        with self._lock:
            now = time.monotonic()
            used = [t for t in self._window if now - t < self.window_s]
            reset_in = self.window_s - (now - used[0]) if used else 0.0
        reset = datetime.fromtimestamp(time.time() + reset_in, tz=UTC)
        return {
            "anthropic-ratelimit-requests-limit": str(self.rate_limit),
            "anthropic-ratelimit-requests-remaining": str(max(0, self.rate_limit - len(used))),
            "anthropic-ratelimit-requests-reset": reset.isoformat().replace("+00:00", "Z"),
        }

    def _go_away(self) -> None:
        """Stop listening: every later connection is refused."""
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        host, port = self._address
        return f"http://{host!s}:{port}"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def __enter__(self) -> FakeAnthropic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.stopped.is_set():
            self.stopped.set()
            self._go_away()
        self._thread.join(timeout=5)
        self._server.server_close()  # again: a no-op unless the stop raced the exit
