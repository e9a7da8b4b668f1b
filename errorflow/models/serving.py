"""How real models are served to the runs of one process: limits, caches, recordings.

A `Serving` is installed for a process (the CLI does, from its options) or for a block
(`with serving(Serving(...))`); every model backend made while it is in effect uses it:

- `limits`: one `RateLimiter` per model server and model, shared by every trial of
  every run of the process (errorflow/models/rate_limit.py);
- `cache_dir`: the response cache (errorflow/models/exchange_store.py);
- `traffic_dir`: where every reply used is logged, for `errorflow export`;
- `cassette`: replay a recorded session instead of calling any server;
- `tally`: a dry run: the simulated model answers in place of every real one, and what
  the real one would have been sent is counted (errorflow/models/model_estimate.py);
- `temperature`, `prompt_cache`: what goes on the wire (errorflow/models/anthropic/backend.py,
  errorflow/models/openai/wire.py);
- `request_timeout_s`: how long a request waits for the server's reply; a server silent
  that long fails the trial as an infrastructure fault;
- `busy_wait_s`: after a request timed out, how long the requests after it may be held
  while the server is asked to answer again (one `BusyServer` per server and model, like
  the limiters: errorflow/models/busy_server.py, which also counts the timeouts); 0
  sends them at once.

It also keeps what was sent, by model (`ModelTraffic`), for the summary a command
prints. Without one installed, a process gets the defaults: no limits, no cache, no
log, and 429s still waited out.

The backends also need to know which experiment they serve (the response cache and the
traffic log key on it). `note_scenario` records the scenario of the run about to start
(the runner's and an agent process's first step, `check_backends`, calls it), for the
backends made after it in the same task.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

from errorflow.models.busy_server import BusyServer
from errorflow.models.cassette import Cassette
from errorflow.models.exchange_store import ExchangeLog, ResponseCache
from errorflow.models.paced import DEFAULT_MAX_PACING_S
from errorflow.models.rate_limit import RateLimiter, RateLimits
from errorflow.scenario.spec.model import ModelSpec, Scenario

#: How long a request waits for its reply (`Serving.request_timeout_s`): a long reply
#: takes well under it, and it stays below `MAX_REQUEST_TIMEOUT_S`.
DEFAULT_REQUEST_TIMEOUT_S = 60.0
#: The most a request may wait: below the runner's trial timeout (120 s), so that a
#: server that never answers fails its trial as an infrastructure fault before the
#: runner gives the trial up as a bus fault (its final result never came) even where
#: the runner cannot see the request (an agent in another process: in its own process
#: the time is not counted, errorflow/core/outside_time.py).
MAX_REQUEST_TIMEOUT_S = 100.0
#: The default `busy_wait_s`, in request timeouts: the reply its client gave up on and
#: the requests queued with it, each at most a timeout long, and room to spare.
BUSY_WAIT_TIMEOUTS = 5

T = TypeVar("T")

#: What the vendors' APIs are called in labels when a spec names no base_url.
ANTHROPIC_API = "api.anthropic.com"
OPENAI_API = "api.openai.com"
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def server_of(spec: ModelSpec) -> str:
    """`host[:port]` of a spec's server, never its user or password."""
    if spec.base_url is None:
        return OPENAI_API if spec.backend == "openai" else ANTHROPIC_API
    parts = urlsplit(spec.base_url)
    host = parts.hostname or spec.base_url
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{parts.port}" if parts.port else shown


def model_label(spec: ModelSpec) -> str:
    """How a real model is named in summaries: `claude-haiku-4-5 @ api.anthropic.com`."""
    from_spec = spec.model or "claude-haiku-4-5"  # the backend's default model
    return f"{from_spec} @ {server_of(spec)}"


def is_local(spec: ModelSpec) -> bool:
    """A server on this machine (Ollama, vLLM, llama.cpp): nothing to pay per token."""
    if spec.base_url is None:
        return False
    return (urlsplit(spec.base_url).hostname or "").lower() in LOCAL_HOSTS


@dataclass
class ModelTraffic:
    """What one model was asked in this process (the limiter counts requests and 429s)."""

    replies: int = 0  # replies the agents got, from anywhere
    cache_hits: int = 0
    cache_misses: int = 0
    replayed: int = 0
    # usage of the replies the server gave (what was paid for), input split three ways
    input_tokens: int = 0  # uncached
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0


@dataclass
class Tally:
    """A dry run's count, by model label: the calls the simulated path made and the
    tokens their requests and replies would be on the wire."""

    calls: dict[str, int] = field(default_factory=dict)
    input_tokens: dict[str, int] = field(default_factory=dict)
    output_tokens: dict[str, int] = field(default_factory=dict)
    #: By agent: the largest first request of a round (system, tools, task, upstream).
    first_input: dict[str, int] = field(default_factory=dict)

    def add(self, label: str, input_tokens: int, output_tokens: int) -> None:
        self.calls[label] = self.calls.get(label, 0) + 1
        self.input_tokens[label] = self.input_tokens.get(label, 0) + input_tokens
        self.output_tokens[label] = self.output_tokens.get(label, 0) + output_tokens


@dataclass
class Serving:
    limits: RateLimits = field(default_factory=RateLimits)
    cache_dir: Path | None = None
    traffic_dir: Path | None = None
    cassette: Cassette | None = None
    tally: Tally | None = None
    temperature: str = "auto"  # TemperaturePolicy: auto, always, never
    prompt_cache: bool = True
    max_pacing_s: float = DEFAULT_MAX_PACING_S
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    #: None: BUSY_WAIT_TIMEOUTS request timeouts; 0: requests are never held.
    busy_wait_s: float | None = None
    traffic: dict[str, ModelTraffic] = field(default_factory=dict)
    limiters: dict[str, RateLimiter] = field(default_factory=dict)
    busy_servers: dict[str, BusyServer] = field(default_factory=dict)
    _cache: ResponseCache | None = field(default=None, repr=False)
    _log: ExchangeLog | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not 0 < self.request_timeout_s <= MAX_REQUEST_TIMEOUT_S:
            raise ValueError(
                f"request_timeout_s must be above 0 and at most {MAX_REQUEST_TIMEOUT_S:g}, "
                f"found {self.request_timeout_s:g}"
            )
        if self.busy_wait_s is not None and not 0 <= self.busy_wait_s < float("inf"):
            raise ValueError(f"busy_wait_s must be 0 or more, found {self.busy_wait_s:g}")

    @property
    def server_wait_s(self) -> float:
        """How long a server is waited for after a request timed out (0: not at all)."""
        if self.busy_wait_s is None:
            return BUSY_WAIT_TIMEOUTS * self.request_timeout_s
        return self.busy_wait_s

    def busy_server(self, label: str) -> BusyServer:
        """A server and model's requests that timed out, and the wait for it after one."""
        return _one_per_label(self.busy_servers, label, BusyServer)

    def limiter(self, label: str) -> RateLimiter:
        return _one_per_label(self.limiters, label, lambda: RateLimiter(self.limits))

    def counts(self, label: str) -> ModelTraffic:
        return self.traffic.setdefault(label, ModelTraffic())

    @property
    def response_cache(self) -> ResponseCache | None:
        if self._cache is None and self.cache_dir is not None:
            self._cache = ResponseCache(self.cache_dir)
        return self._cache

    @property
    def traffic_log(self) -> ExchangeLog | None:
        if self._log is None and self.traffic_dir is not None:
            self._log = ExchangeLog(self.traffic_dir)
        return self._log

    @property
    def calls_servers(self) -> bool:
        """Whether real backends talk to their servers (not a replay, not a dry run)."""
        return self.cassette is None and self.tally is None


def _one_per_label(made: dict[str, T], label: str, make: Callable[[], T]) -> T:
    """The one made for `label` in this process (made on first use)."""
    if label not in made:
        made[label] = make()
    return made[label]


_DEFAULT = Serving()
_CURRENT: contextvars.ContextVar[Serving | None] = contextvars.ContextVar(
    "errorflow_serving", default=None
)
_SCENARIO: contextvars.ContextVar[Scenario | None] = contextvars.ContextVar(
    "errorflow_served_scenario", default=None
)


def current() -> Serving:
    return _CURRENT.get() or _DEFAULT


def install(settings: Serving) -> None:
    """`settings` for the rest of this context (a CLI command's: `main` runs each command
    in a context of its own)."""
    _CURRENT.set(settings)


@contextlib.contextmanager
def serving(settings: Serving) -> Iterator[Serving]:
    token = _CURRENT.set(settings)
    try:
        yield settings
    finally:
        _CURRENT.reset(token)


def note_scenario(scenario: Scenario) -> None:
    _SCENARIO.set(scenario)


def noted_scenario() -> Scenario | None:
    return _SCENARIO.get()
