"""OpenTelemetry receivers for the tests of `errorflow export --otlp`.

- `ProtoReceiver`: a minimal OTLP/HTTP receiver, `POST /v1/traces` with a protobuf
  `ExportTraceServiceRequest` (decoded with the official `opentelemetry-proto` classes),
  on a loopback port; it keeps every span it was sent;
- `Phoenix`: Arize Phoenix (`phoenix serve`), a real OpenTelemetry backend, when one is
  installed (ERRORFLOW_TEST_PHOENIX names its executable, or `phoenix` is on PATH); it
  takes OTLP/HTTP at its port and gives the spans back over its REST API. It keeps no
  span links: the link structure is read back from `ProtoReceiver`.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.conftest import free_port


class ProtoReceiver:
    """Spans as received: dicts with hex ids, parent, name, attributes and links."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.requests = 0
        self.authorizations: list[str | None] = []  # each request's Authorization header
        self.times: list[float] = []  # each request's arrival (time.monotonic)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # the name http.server calls
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                ok = self.path == "/v1/traces"
                receiver.authorizations.append(self.headers.get("Authorization"))
                receiver.times.append(time.monotonic())
                if ok:
                    receiver._take(ExportTraceServiceRequest.FromString(body))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _take(self, request: ExportTraceServiceRequest) -> None:
        self.requests += 1
        for rs in request.resource_spans:
            resource = {a.key: _value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    self.spans.append(
                        {
                            "trace_id": s.trace_id.hex(),
                            "span_id": s.span_id.hex(),
                            "parent": s.parent_span_id.hex() or None,
                            "name": s.name,
                            "status": s.status.code,
                            "attributes": {a.key: _value(a.value) for a in s.attributes},
                            "events": [e.name for e in s.events],
                            "links": [
                                (link.trace_id.hex(), link.span_id.hex()) for link in s.links
                            ],
                            "resource": resource,
                        }
                    )

    def __enter__(self) -> ProtoReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def phoenix_binary() -> str | None:
    named = os.environ.get("ERRORFLOW_TEST_PHOENIX")
    if named:
        return named
    return shutil.which("phoenix")


class Phoenix:
    """`phoenix serve` on loopback ports, its data in `workdir`."""

    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary, self.workdir = binary, workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Phoenix:
        env = {
            **os.environ,
            "PHOENIX_WORKING_DIR": str(self.workdir),
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(self.port),
            "PHOENIX_GRPC_PORT": str(free_port()),
            "PHOENIX_TELEMETRY_ENABLED": "false",
        }
        log = (self.workdir / "phoenix.log").open("wb")
        self.proc = subprocess.Popen(
            [self.binary, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 180  # its first start migrates a new database
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"phoenix exited: see {self.workdir / 'phoenix.log'}")
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        raise RuntimeError("phoenix did not start within 180 s")

    def spans(self, project: str) -> list[dict[str, Any]]:
        """Every span of `project`, through the REST API."""
        out: list[dict[str, Any]] = []
        cursor = ""
        while True:
            url = f"{self.url}/v1/projects/{project}/spans?limit=1000{cursor}"
            try:
                with urllib.request.urlopen(url, timeout=10) as r:
                    page = json.load(r)
            except OSError:
                return out  # the project does not exist yet
            out += page["data"]
            if not page.get("next_cursor"):
                return out
            cursor = f"&cursor={page['next_cursor']}"

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
