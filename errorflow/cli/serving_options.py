"""The options of `run` and `sweep` for real models: what a run may cost and how fast it
may go, the response cache, replaying a recorded session, and what goes on the wire.
`serving_of` turns them into the `Serving` the run's backends use
(errorflow/models/serving.py)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from errorflow.cli.args import nonneg_float, positive, positive_float, wait_seconds
from errorflow.cli.errors import UsageError, shown
from errorflow.cli.paths import check_directory, path_arg
from errorflow.models.cassette import Cassette, CassetteError
from errorflow.models.exchange_store import traffic_dir_for
from errorflow.models.rate_limit import RateLimits
from errorflow.models.serving import (
    BUSY_WAIT_TIMEOUTS,
    DEFAULT_REQUEST_TIMEOUT_S,
    MAX_REQUEST_TIMEOUT_S,
    Serving,
)
from errorflow.reports.prices import Price, PriceError, parse_price

#: Ask before a real run expected to cost more than this (US dollars).
DEFAULT_MAX_COST = 5.0
#: Ask before a real run of a model without a price expected to make more calls.
DEFAULT_MAX_CALLS = 1000
REPLAY = "replay:"


_positive_float = positive_float  # finite: `--rpm inf` or `--max-cost nan` is no limit


def _request_timeout(text: str) -> float:
    value = _positive_float(text)
    if value > MAX_REQUEST_TIMEOUT_S:  # past the trial timeout, silence is a bus fault
        raise argparse.ArgumentTypeError(
            f"expected at most {MAX_REQUEST_TIMEOUT_S:g} seconds, found {text}"
        )
    return value


def _busy_wait(text: str) -> float:
    """0 (no wait), or seconds up to a day."""
    return wait_seconds(text) if nonneg_float(text) else 0.0


def _price(text: str) -> str:
    """An argparse type: MODEL=IN/OUT with finite prices, checked whether or not the
    command comes to need them."""
    try:
        _, price = parse_price(text)
    except PriceError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not math.isfinite(price.input_per_mtok + price.output_per_mtok):
        raise argparse.ArgumentTypeError(f"expected finite prices, found {shown(text)}")
    return text


#: The argparse types other commands share (errorflow calibrate).
price_arg = _price
request_timeout_arg = _request_timeout
busy_wait_arg = _busy_wait


def _backend(text: str) -> str:
    if not text.startswith(REPLAY) or not text[len(REPLAY) :]:
        raise argparse.ArgumentTypeError(f"expected replay:FILE, found {shown(text)}")
    path_arg(text[len(REPLAY) :])
    return text


def _spend_options(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--dry-run",
        action="store_true",
        help="call no model: print, per real model, the calls and tokens the run is expected "
        "to take (the simulated model's path through the same runs) and the most the policy "
        "allows, with their cost when --price gives it; Python and MCP tools are still "
        "called",
    )
    sp.add_argument(
        "--price",
        type=_price,
        action="append",
        metavar="MODEL=IN/OUT",
        help="what a model costs, US dollars per million input/output tokens, e.g. "
        "claude-haiku-4-5=1/5 (repeatable; a server on this machine costs nothing)",
    )
    sp.add_argument(
        "--max-cost",
        type=_positive_float,
        default=DEFAULT_MAX_COST,
        metavar="USD",
        help=f"ask before a run expected to cost more (default: {DEFAULT_MAX_COST:g})",
    )
    sp.add_argument(
        "--max-calls",
        type=positive,
        default=DEFAULT_MAX_CALLS,
        metavar="N",
        help="ask before a run expected to make more calls to a remote model without a "
        f"--price (default: {DEFAULT_MAX_CALLS})",
    )
    sp.add_argument("--yes", action="store_true", help="do not ask; run whatever it costs")


def _serving_options(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--cache",
        type=path_arg,
        metavar="DIR",
        help="response cache: a request made before (same model, prompt, parameters, "
        "scenario, seed, trial) is answered from DIR with no call; new replies are added",
    )
    sp.add_argument(
        "--backend",
        type=_backend,
        metavar="replay:FILE",
        help="answer every real model from a recorded session (`errorflow export RUN_ID "
        "--format cassette`): no server, no API key",
    )
    sp.add_argument("--max-concurrency", type=positive, metavar="N",
                    help="at most N requests in flight per model server")  # fmt: skip
    sp.add_argument("--rpm", type=_positive_float, metavar="N",
                    help="at most N requests a minute per model server")  # fmt: skip
    sp.add_argument("--tpm", type=_positive_float, metavar="N",
                    help="at most N tokens (in and out) a minute per model server")  # fmt: skip
    sp.add_argument(
        "--send-temperature",
        choices=["auto", "always", "never"],
        default="auto",
        help="send the model's temperature: auto (to every server but Anthropic's API, "
        "whose version 2026-10-21 refuses it), always or never",
    )
    sp.add_argument(
        "--model-timeout",
        type=_request_timeout,
        default=DEFAULT_REQUEST_TIMEOUT_S,
        metavar="SECONDS",
        help="how long a request waits for the model server's reply; a server silent that "
        "long fails the trial as an infrastructure fault (default: "
        f"{DEFAULT_REQUEST_TIMEOUT_S:g}, at most {MAX_REQUEST_TIMEOUT_S:g})",
    )
    sp.add_argument(
        "--busy-wait",
        type=_busy_wait,
        default=None,
        metavar="SECONDS",
        help="after a request timed out, hold the next ones to that server until it answers "
        "a one-token request again, for up to SECONDS: a server that answers one request at "
        "a time (llama.cpp's) is still writing the reply its client gave up on, and what "
        "is sent meanwhile would time out behind it; a request is held at most its "
        f"--model-timeout (default: {BUSY_WAIT_TIMEOUTS} × --model-timeout; 0: never hold)",
    )
    sp.add_argument(
        "--no-prompt-cache",
        action="store_true",
        help="do not mark the system prompt and tools cache_control (for a server that "
        "refuses the field)",
    )


def model_options(sp: argparse.ArgumentParser) -> None:
    _spend_options(sp)
    _serving_options(sp)


def prices_of(args: argparse.Namespace) -> dict[str, Price]:
    prices: dict[str, Price] = {}
    for text in getattr(args, "price", None) or []:
        try:
            model, price = parse_price(text)
        except PriceError as exc:
            raise UsageError(str(exc), where="--price") from None
        prices[model] = price
    return prices


def serving_of(args: argparse.Namespace) -> Serving:
    """The `Serving` the options describe (a cassette is read now: a bad one is bad input)."""
    cassette = None
    backend = getattr(args, "backend", None)
    if backend:
        path = Path(backend[len(REPLAY) :])
        try:
            cassette = Cassette.load(path)
        except CassetteError as exc:
            raise UsageError(str(exc), where="--backend") from None
    cache = getattr(args, "cache", None)
    if cache:
        check_directory(cache, "--cache")
    return Serving(
        limits=RateLimits(
            concurrency=getattr(args, "max_concurrency", None),
            requests_per_minute=getattr(args, "rpm", None),
            tokens_per_minute=getattr(args, "tpm", None),
        ),
        cache_dir=Path(cache) if cache else None,
        traffic_dir=traffic_dir_for(Path(args.db)),
        cassette=cassette,
        temperature=getattr(args, "send_temperature", "auto"),
        prompt_cache=not getattr(args, "no_prompt_cache", False),
        request_timeout_s=getattr(args, "model_timeout", DEFAULT_REQUEST_TIMEOUT_S),
        busy_wait_s=getattr(args, "busy_wait", None),
    )
