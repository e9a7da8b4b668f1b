"""`errorflow calibrate`: measure the simulated model's behaviour parameters on a real
model (errorflow.calibration) and write the profile file a scenario names."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import sys
from pathlib import Path

from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from errorflow.calibration.estimate import Estimate, Model, estimates, profile_of
from errorflow.calibration.probes import FAMILIES, Probe, plan
from errorflow.calibration.session import CalibrationError, ProbeResult, run_probes
from errorflow.calibration.target import (
    Target,
    TargetError,
    estimate_tokens,
    real_target,
    recording_dir,
    replayed_spec,
    write_cassette,
)
from errorflow.cli.args import positive
from errorflow.cli.command_table import summary
from errorflow.cli.console import err, out
from errorflow.cli.errors import EXIT_OK, RunFailure, UsageError
from errorflow.cli.paths import path_arg
from errorflow.cli.serving_options import (
    busy_wait_arg,
    price_arg,
    prices_of,
    request_timeout_arg,
)
from errorflow.models.api_keys import KEY_ENVS, local_hint
from errorflow.models.cassette import Cassette, CassetteError
from errorflow.models.serving import BUSY_WAIT_TIMEOUTS, Serving, is_local, server_of
from errorflow.scenario.provenance.profile_file import profile_yaml
from errorflow.scenario.provenance.view import profile_view
from errorflow.scenario.spec.model import ModelSpec
from errorflow.scenario.spec.profiles import PROFILES, Tendencies

REPLAY = "replay:"
BACKENDS = ("openai", "anthropic", "simulated")


def _backend(text: str) -> str:
    if text in BACKENDS or (text.startswith(REPLAY) and len(text) > len(REPLAY)):
        return text
    raise argparse.ArgumentTypeError(
        f"expected one of {', '.join(BACKENDS)} or replay:FILE, found {text!r}"
    )


def _level(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.5 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a level from 0.5 to below 1, found {text!r}")
    return value


def _families(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in FAMILIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown probe family {', '.join(unknown) or '(none)'}; known: {', '.join(FAMILIES)}"
        )
    return names


def _target(args: argparse.Namespace) -> Target:
    """The model to probe, from the options (a cassette is read now)."""
    serving = Serving(
        cache_dir=Path(args.cache) if args.cache else None,
        temperature=args.send_temperature,
        request_timeout_s=args.model_timeout,
        busy_wait_s=args.busy_wait,
    )
    if args.backend == "simulated":
        base: Tendencies = profile_view(args.base, {}, None).base
        return Target(ModelSpec(), serving, args.seed, simulated=base)
    if args.backend.startswith(REPLAY):
        try:
            serving.cassette = Cassette.load(Path(args.backend[len(REPLAY) :]))
        except CassetteError as exc:
            raise UsageError(str(exc), where="--backend") from None
        spec, seed = replayed_spec(serving.cassette)
        if seed != args.seed:
            raise UsageError(f"the cassette was recorded with --seed {seed}", where="--seed")
        return Target(spec, serving, args.seed)
    if not args.model:
        raise UsageError(f"--backend {args.backend} needs --model NAME", where="--model")
    try:
        spec = ModelSpec(backend=args.backend, model=args.model, base_url=args.base_url,
                         temperature=args.temperature, max_tokens=args.max_tokens)  # fmt: skip
    except ValidationError as exc:
        first = exc.errors()[0]
        where = f"--{str(first['loc'][0]).replace('_', '-')}"
        raise UsageError(first["msg"], where=where) from None
    if args.dry_run:  # nothing is sent: no key needed
        return Target(spec, serving, args.seed)
    key = os.environ.get(KEY_ENVS[args.backend])
    if not key:
        raise UsageError(
            f"the {args.backend} backend reads its key from {KEY_ENVS[args.backend]}, which "
            f"is not set ({local_hint(args.backend)})"
        )
    if args.record:
        serving.traffic_dir = recording_dir()
    return real_target(spec, serving, args.seed, key)


def _print_dry_run(args: argparse.Namespace, target: Target, probes: list[Probe]) -> None:
    tokens_in, tokens_out = estimate_tokens(target, probes)
    wanting = sum(1 for p in probes if p.wants_final)
    line = (
        f"dry run: {len(probes)} probes ({len(probes) - wanting} of one reply, {wanting} of "
        f"up to 3) against {target.label}: at least {len(probes)} and at most "
        f"{len(probes) + 2 * wanting} calls, about {tokens_in:,} input and {tokens_out:,} "
        "output tokens for the first reply of each"
    )
    price = prices_of(args).get(target.spec.model or "")
    if is_local(target.spec):
        line += "; a server on this machine costs nothing"
    elif price is not None:
        cost = (tokens_in * price.input_per_mtok + tokens_out * price.output_per_mtok) / 1e6
        line += f"; about ${cost:.2f} at the given --price"
    else:
        line += "; give --price MODEL=IN/OUT for its cost"
    out.print(line, highlight=False)


def _estimate_table(found: dict[str, Estimate], label: str) -> Table:
    table = Table(title=f"Calibration of {label}", title_justify="left")
    level = next(iter(found.values())).confidence if found else 0.95
    ci = f"{level:.1%} CI".replace(".0%", "%")
    for name in ("parameter", "estimate", ci, "probes", "unclassified", "family"):
        table.add_column(name, justify="left" if name in ("parameter", "family") else "right")
    for est in found.values():
        low, high = est.interval
        shown = "-" if est.value is None else f"{est.value:.2f}"
        table.add_row(est.parameter, shown, f"{low:.2f}-{high:.2f}", str(est.probes),
                      str(est.unclassified), est.family)  # fmt: skip
    return table


async def _probe(
    target: Target, probes: list[Probe], args: argparse.Namespace
) -> list[ProbeResult]:
    bar = Progress(
        TextColumn("[bold]probing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err, disable=args.quiet or args.json or not sys.stderr.isatty(),
    )  # fmt: skip
    with bar:
        task = bar.add_task("probes", total=len(probes))
        try:
            await target.check()
            wait_s = target.serving.server_wait_s
            return await run_probes(
                probes, target.backend_for, concurrency=args.concurrency,
                on_done=lambda _: bar.advance(task),
                wait_free=(lambda: target.wait_free(wait_s)) if wait_s > 0 else None,
            )  # fmt: skip
        finally:
            await target.aclose()


def cmd_calibrate(args: argparse.Namespace) -> int:
    if not args.dry_run and not args.out:
        raise UsageError("name the profile file to write with --out FILE", where="--out")
    try:
        target = _target(args)
    except TargetError as exc:
        raise UsageError(str(exc), where="--backend") from None
    probes = plan(args.seed, args.probes, args.families)
    if args.dry_run:
        _print_dry_run(args, target, probes)
        return EXIT_OK
    try:
        results = asyncio.run(_probe(target, probes, args))
    except (CalibrationError, TargetError) as exc:
        keep = "" if args.cache else " (--cache DIR keeps the replies so far for the next try)"
        raise RunFailure(f"calibration stopped: {exc}{keep}") from None
    found = estimates(results, args.confidence)
    spec = target.spec
    model = Model(
        model=f"simulated {args.base}" if target.simulated is not None else spec.model or "",
        backend=args.backend.split(":")[0],
        server=None if target.simulated is not None else server_of(spec),
        date=dt.date.today().isoformat(),
    )
    name = args.name or _profile_name(model.model)
    doc = profile_of(name, found, model, base=args.base)
    Path(args.out).write_text(profile_yaml(doc), encoding="utf-8")
    if args.record and target.serving.traffic_dir is not None:
        write_cassette(Path(args.record), target.serving.traffic_dir, spec, args.seed, args.probes)
    if args.json:
        print(json.dumps({p: _estimate_json(e) for p, e in found.items()}, indent=2))
        return EXIT_OK
    out.print(_estimate_table(found, target.label))
    errors = [r.error for r in results if r.error]
    if errors:
        out.print(
            f"{len(errors)} probes unanswered or unfinished, e.g. {errors[0]}", highlight=False
        )
    out.print(f"wrote {args.out} (use it as `model: {{profile: {args.out}}}`)", highlight=False)
    return EXIT_OK


def _estimate_json(e: Estimate) -> dict[str, object]:
    return {
        "estimate": e.value,
        "interval": list(e.interval),
        "successes": e.successes,
        "probes": e.probes,
        "unclassified": e.unclassified,
        "family": e.family,
    }


def _profile_name(model: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "-_." else "-" for c in model).strip("-.")
    return (cleaned or "calibrated")[:64]


def add_calibrate(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sp = sub.add_parser(
        "calibrate",
        help=summary("calibrate"),
        description="Probe a model with small tool-using conversations, one family per "
        "behaviour parameter of the simulated model (does it retry a transient error, "
        "repair an argument with and without the valid options, drop a required argument, "
        "flag an empty result, fabricate on an empty or missing value, heed an upstream "
        "failure, keep its own evidence against disagreeing peers), classify each reply by "
        "a fixed rule, and write a profile file: every estimate with its 95% Wilson "
        "interval and probe count, every parameter not measured marked assumed. The same "
        "--seed asks the same questions; --cache and --record make it repeatable.",
    )
    sp.add_argument(
        "--backend",
        type=_backend,
        required=True,
        help="openai, anthropic, replay:FILE (a cassette --record wrote), or "
        "simulated (probe the simulated model with --base: a check of the probes)",
    )
    sp.add_argument("--model", help="the model to call (openai, anthropic)")
    sp.add_argument("--base-url", help="the server (default: the vendor's API)")
    sp.add_argument("--temperature", type=float, default=0.7, help="default: 0.7")
    sp.add_argument("--max-tokens", type=positive, default=512, help="per reply (default: 512)")
    sp.add_argument(
        "--probes", type=positive, default=20, metavar="N", help="probes per family (default: 20)"
    )
    sp.add_argument(
        "--families",
        type=_families,
        metavar="A,B",
        help=f"only these probe families (of: {', '.join(FAMILIES)})",
    )
    sp.add_argument("--seed", type=int, default=0, help="varies the probes' wording and values")
    sp.add_argument(
        "--base",
        choices=list(PROFILES),
        default="small-local",
        help="the built-in profile whose values fill what is not measured",
    )
    sp.add_argument("--name", help="the profile's name (default: from the model's)")
    sp.add_argument(
        "--out",
        type=path_arg,
        metavar="FILE",
        help="the profile file to write (required, unless --dry-run)",
    )
    _serving_options(sp)
    sp.set_defaults(func=cmd_calibrate)


def _serving_options(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--dry-run",
        action="store_true",
        help="call nothing: print the probes, calls and tokens it would take",
    )
    sp.add_argument(
        "--price",
        type=price_arg,
        action="append",
        metavar="MODEL=IN/OUT",
        help="US dollars per million input/output tokens, for --dry-run",
    )
    sp.add_argument(
        "--cache",
        type=path_arg,
        metavar="DIR",
        help="response cache: a probe asked before is answered from DIR",
    )
    sp.add_argument(
        "--record",
        type=path_arg,
        metavar="FILE",
        help="also write the exchanges as a cassette (replay with --backend replay:FILE)",
    )
    sp.add_argument("--concurrency", type=positive, default=2, help="probes at once (default: 2)")
    sp.add_argument(
        "--model-timeout",
        type=request_timeout_arg,
        default=60.0,
        metavar="SECONDS",
        help="how long a reply may take (default: 60)",
    )
    sp.add_argument(
        "--busy-wait",
        type=busy_wait_arg,
        default=None,
        metavar="SECONDS",
        help="after a reply timed out, how long to wait for the server to answer again "
        "before the next probe: a server that answers one request at a time (llama.cpp's) "
        "is still writing that reply; one that does not answer in time stops the "
        f"calibration (default: {BUSY_WAIT_TIMEOUTS} × --model-timeout; 0: do not wait)",
    )
    sp.add_argument(
        "--send-temperature",
        choices=["auto", "always", "never"],
        default="auto",
        help="send the temperature: auto (to every server but the vendors' own)",
    )
    sp.add_argument(
        "--confidence",
        type=_level,
        default=0.95,
        metavar="LEVEL",
        help="each interval's confidence (default: 0.95; with a dozen parameters "
        "about one 95%% interval in twenty misses: 0.995 makes them all hold "
        "together 95%% of the time)",
    )
    sp.add_argument("--json", action="store_true", help="print the estimates as JSON")
    sp.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
