"""A real model as one trial's agent sees it: the response cache, a cassette or the
server, and the traffic log, between the agent and the wire.

One `ServedBackend` per trial and agent (and revision round), made by the backend
factory. Each request is rendered to its wire body once, keyed (errorflow/agents/
exchange.py), and answered from the first of: the cassette being replayed, the response
cache, the server (through the shared rate limiter). Whatever answered is logged to the
traffic log and parsed as the server's own reply would be, so a cached or replayed run
gives its agents exactly what the recorded one got: same answers, same usage. A request
to the server is timed for its trial while it waits and is answered (the runner's trial
timeout does not count that time: errorflow/core/outside_time.py).
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

from errorflow.core.outside_time import outside_call
from errorflow.core.taxonomy import ErrorCode
from errorflow.models.backend import ModelCallError, ModelRequest, ModelResponse
from errorflow.models.exchange import (
    Experiment,
    Place,
    exchange_key,
    record,
    request_digest,
)
from errorflow.models.serving import ModelTraffic, Serving
from errorflow.models.wire import Wire, WireRequest
from errorflow.protocol.envelope import JsonObject


class Sender(Protocol):
    async def send(self, body: WireRequest) -> JsonObject: ...


class ServedBackend:
    def __init__(
        self,
        wire: Wire,
        sender: Sender | None,
        serving: Serving,
        label: str,
        experiment: Experiment | None,
        place: Place,
    ) -> None:
        self.wire, self.sender, self.serving, self.label = wire, sender, serving, label
        self.experiment, self.place = experiment, place
        self._repeats: Counter[str] = Counter()  # identical requests asked so far

    @property
    def counts(self) -> ModelTraffic:
        return self.serving.counts(self.label)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        body, names = self.wire.render(request)
        reply = await self._reply(body)
        return self.wire.parse(reply, names)

    async def _reply(self, body: WireRequest) -> JsonObject:
        if self.experiment is None:  # no experiment known: nothing can be keyed
            return await self._from_server(body)
        digest = request_digest(body)
        repeat = self._repeats[digest]
        key = exchange_key(self.experiment, self.place, body, repeat)
        reply = self._stored(key)
        fresh = reply is None
        if reply is None:
            reply = await self._from_server(body)
        self._repeats[digest] += 1
        rec = record(key, self.experiment, self.place, repeat, body, reply)
        cache = self.serving.response_cache
        if fresh and cache is not None:
            cache.put(rec)
        log = self.serving.traffic_log
        if log is not None:
            log.append(rec)
        return reply

    def _stored(self, key: str) -> JsonObject | None:
        cassette = self.serving.cassette
        if cassette is not None:
            reply = cassette.get(key)
            if reply is None:
                reason = (
                    f"the cassette {cassette.path.name} has no reply for a request of "
                    f"{self.place.owner} in trial {self.place.trial} (it recorded "
                    f"{cassette.recorded()}: replay the same scenario, seed and --set options)"
                )
                raise ModelCallError(ErrorCode.MODEL_ERROR, reason, infrastructure=reason)
            self.counts.replayed += 1
            self.counts.replies += 1
            return reply
        cache = self.serving.response_cache
        if cache is None:
            return None
        reply = cache.get(key)
        if reply is None:
            self.counts.cache_misses += 1
        else:
            self.counts.cache_hits += 1
            self.counts.replies += 1
        return reply

    async def _from_server(self, body: WireRequest) -> JsonObject:
        if self.sender is None:  # a replay without the key (unreachable: _stored raised)
            raise ModelCallError(ErrorCode.INTERNAL_ERROR, "no model server to ask")
        with outside_call():
            reply = await self.sender.send(body)
        self._count_usage(reply)
        return reply

    def _count_usage(self, reply: JsonObject) -> None:
        c = self.counts
        c.replies += 1
        usage = self.wire.usage(reply)
        c.input_tokens += usage.uncached_input_tokens
        c.cache_read_tokens += usage.cache_read_tokens
        c.cache_write_tokens += usage.cache_write_tokens
        c.output_tokens += usage.output_tokens
