"""What real models were sent (after a run) or would be (a dry run), by model.

After a run: requests sent to the server, 429s waited out and for how long, requests
that timed out and those held meanwhile (errorflow/models/busy_server.py), replies
served by the response cache or a cassette instead, and the tokens the server counted
(input split into uncached, read from and written to its prompt cache), with their cost
where a price is known. Before one (`--dry-run`): the calls and tokens the simulated
path expects and the most the policy allows, with their cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

from rich import box
from rich.table import Table
from rich.text import Text

from errorflow.models.busy_server import BusyStats
from errorflow.models.model_estimate import Bound
from errorflow.models.serving import LOCAL_HOSTS, Serving, Tally
from errorflow.reports.prices import Price, dollars, price_of
from errorflow.reports.tables import shown


def local_label(label: str) -> bool:
    """Whether a model label's server (`model @ host:port`) is on this machine."""
    server = label.rpartition(" @ ")[2]
    host = server[1:].partition("]")[0] if server.startswith("[") else server.partition(":")[0]
    return host.lower() in LOCAL_HOSTS


class TrafficJson(TypedDict):
    requests: int
    rate_limited: int
    paced_s: float
    peak_in_flight: int
    server_slots: int | None
    timed_out: int
    #: One-token requests that asked whether the server answered again after a timeout
    #: (not in `requests`: they are no experiment's).
    checks: int
    held: int
    held_expired: int
    waits_unanswered: int
    replies: int
    cache_hits: int
    cache_misses: int
    replayed: int
    input_tokens_uncached: int
    cache_read_tokens: int
    cache_write_tokens: int
    output_tokens: int
    cost_usd: float | None


def traffic_json(serving: Serving, prices: Mapping[str, Price]) -> dict[str, TrafficJson]:
    """What each real model was sent in this process (empty: no real model served)."""
    out: dict[str, TrafficJson] = {}
    for label in sorted(set(serving.traffic) | set(serving.limiters)):
        c = serving.counts(label)
        stats = serving.limiter(label).stats
        busy = serving.busy_servers.get(label)
        held = busy.stats if busy is not None else BusyStats()
        price = price_of(label, prices, local_label(label))
        cost = None
        if price is not None:
            cost = round(
                price.cost(c.input_tokens, c.output_tokens, c.cache_read_tokens,
                           c.cache_write_tokens), 6)  # fmt: skip
        out[label] = {
            "requests": stats.requests,
            "rate_limited": stats.rate_limited,
            "paced_s": round(stats.paced_s, 3),
            "peak_in_flight": stats.peak_in_flight,
            "server_slots": stats.server_slots,
            "timed_out": held.timeouts,
            "checks": held.waits,
            "held": held.held,
            "held_expired": held.expired,
            "waits_unanswered": held.unanswered,
            "replies": c.replies,
            "cache_hits": c.cache_hits,
            "cache_misses": c.cache_misses,
            "replayed": c.replayed,
            "input_tokens_uncached": c.input_tokens,
            "cache_read_tokens": c.cache_read_tokens,
            "cache_write_tokens": c.cache_write_tokens,
            "output_tokens": c.output_tokens,
            "cost_usd": cost,
        }
    return out


def traffic_lines(data: Mapping[str, TrafficJson]) -> list[str]:
    """One line a model: `model traffic: claude-haiku-4-5 @ api.anthropic.com: 40
    requests, 38 answered (2 rate-limited, 3.1s waited); response cache 0 hits, 40
    misses; input tokens 2,100 uncached + 30,000 cache read + 1,500 cache write; output
    900; $0.02`. A request is every attempt sent (a refused connection, an error
    status, a timeout too); answered, those the server gave a usable reply to."""
    lines = []
    for label, t in data.items():
        served = f"response cache {t['cache_hits']} hits, {t['cache_misses']} misses"
        if t["replayed"]:
            served = f"{t['replayed']} replies replayed from the cassette"
        lines.append(
            f"model traffic: {shown(label)}: {t['requests']} requests, {_from_server(t)} "
            f"answered ({t['rate_limited']} "
            f"rate-limited, {t['paced_s']:.1f}s waited{_slots(t)}{_timeouts(t)}); {served}; "
            f"input tokens "
            f"{t['input_tokens_uncached']:,} uncached + {t['cache_read_tokens']:,} cache read + "
            f"{t['cache_write_tokens']:,} cache write; output {t['output_tokens']:,}; "
            f"cost {dollars(t['cost_usd'])}"
        )
    return lines


def _slots(t: TrafficJson) -> str:
    slots = t["server_slots"]
    return "" if slots is None else f", {slots} at once as the server said"


def _timeouts(t: TrafficJson) -> str:
    """`, 1 timed out, 1 one-token checks that the server answers again, besides, 3 held
    while the server was waited for (1 not sent: too little time left)`, and the waits
    it did not answer."""
    if not t["timed_out"]:
        return ""
    said = f", {t['timed_out']} timed out"
    if t["checks"]:
        said += f", {t['checks']} one-token checks that the server answers again, besides"
    if t["held"]:
        said += f", {t['held']} held while the server was waited for"
        if t["held_expired"]:
            said += f" ({t['held_expired']} not sent: too little time left)"
    if t["waits_unanswered"]:
        said += f", {t['waits_unanswered']} waits unanswered"
    return said


def _from_server(t: TrafficJson) -> int:
    """The replies the server itself gave (not the cache's or a cassette's)."""
    return t["replies"] - t["cache_hits"] - t["replayed"]


def timeout_hints(data: Mapping[str, TrafficJson]) -> list[str]:
    """What to try when requests to a server that answers timed out with several in
    flight: one that answers one request at a time keeps the others in its queue, where
    their timeouts run (a server that never answered gets no hint: it is silent)."""
    return [
        f"hint: {t['timed_out']} requests to {shown(label)} timed out with up to "
        f"{t['peak_in_flight']} in flight; a server that answers one request at a time "
        "(llama.cpp's) needs --max-concurrency 1 (the others then wait for a free slot "
        "here, where their timeouts do not run), and a --model-timeout its longest reply "
        "fits in"
        for label, t in data.items()
        if t["timed_out"] and t["peak_in_flight"] > 1 and _from_server(t)
    ]


class SpendJson(TypedDict):
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


class EstimateJson(TypedDict):
    expected: SpendJson
    at_most: SpendJson


def _spend(price: Price | None, calls: int, inp: int, outp: int) -> SpendJson:
    cost = None if price is None else round(price.cost(inp, outp), 6)
    return {"calls": calls, "input_tokens": inp, "output_tokens": outp, "cost_usd": cost}


def estimate_json(
    tally: Tally, bounds: Mapping[str, Bound], prices: Mapping[str, Price]
) -> dict[str, EstimateJson]:
    """By model: what the simulated path expects, and the most the policy allows."""
    out: dict[str, EstimateJson] = {}
    for label in sorted(set(tally.calls) | set(bounds)):
        price = price_of(label, prices, local_label(label))
        bound = bounds.get(label, Bound())
        out[label] = {
            "expected": _spend(
                price,
                tally.calls.get(label, 0),
                tally.input_tokens.get(label, 0),
                tally.output_tokens.get(label, 0),
            ),
            "at_most": _spend(price, bound.calls, bound.input_tokens, bound.output_tokens),
        }
    return out


def estimate_table(data: Mapping[str, EstimateJson], title: str) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("model", no_wrap=True)  # a label row of its own: it may be long
    for name in ("calls", "input tokens", "output tokens", "cost"):
        table.add_column(name, justify="right")
    for label, e in data.items():
        table.add_row(Text(shown(label), style="bold"), "", "", "", "")
        for which, row in (("  expected", e["expected"]), ("  at most", e["at_most"])):
            table.add_row(
                which,
                f"{row['calls']:,}",
                f"{row['input_tokens']:,}",
                f"{row['output_tokens']:,}",
                dollars(row["cost_usd"]),
            )
    return table
