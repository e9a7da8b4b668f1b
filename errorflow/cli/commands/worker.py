"""`errorflow worker`: a process that takes trials of runs from the broker, runs them
and sends their results back to the runner (`run --remote-workers`;
errorflow/runtime/broker_workers.py says how).

It needs the run key, given out of band as `errorflow agent`s are (`--key-file`, or
ERRORFLOW_RUN_KEY): the key signs and checks everything on the work channel, so only
runs under that key reach it, and never travels. With `--run RUN_ID` it serves that run
and leaves when the runner says it is over; with `--run any` it serves every run under
its key until stopped (Ctrl-C or SIGTERM). Killed, the runner hands its batch to
another worker.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket

import aiomqtt

from errorflow.cli.args import run_id_arg
from errorflow.cli.command_table import summary
from errorflow.cli.console import say
from errorflow.cli.errors import EXIT_OK, RunFailure, UsageError
from errorflow.cli.paths import path_arg
from errorflow.cli.preflight import broker_of
from errorflow.cli.run_keys import agent_key
from errorflow.cli.signals import interruptible
from errorflow.protocol.signing import KEY_ENV
from errorflow.runtime import work_serve
from errorflow.runtime.work_wire import WORKER_NAME

ANY = "any"


def default_name() -> str:
    host = re.sub(r"[^A-Za-z0-9_.\-]", "-", socket.gethostname())[:40] or "worker"
    return f"{host}-{os.getpid()}"


def cmd_worker(args: argparse.Namespace) -> int:
    url = broker_of(args.broker)
    assert url is not None  # required by the parser
    if not args.key_file and not os.environ.get(KEY_ENV):
        raise UsageError(
            f"the run key is needed to take a run's trials: expected --key-file PATH (the "
            f"runner's) or {KEY_ENV}",
            where="worker",
        )
    key = agent_key(args.key_file)
    name = args.name or default_name()
    if not WORKER_NAME.fullmatch(name):  # `$` alone would let a trailing newline by
        raise UsageError("expected 1-64 letters, digits, '.', '_' or '-'", where="--name")
    run_id = None if args.run == ANY else args.run
    try:
        batches = asyncio.run(interruptible(work_serve.serve(url, key, name, run_id, say)))
    except (OSError, aiomqtt.MqttError) as exc:
        raise RunFailure(f"worker {name}: broker {url}: {exc}") from None
    say(f"worker {name}: ran {batches} batches")
    return EXIT_OK


def add_worker(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    w = sub.add_parser(
        "worker",
        help=summary("worker"),
        description="Take batches of trials from the broker through an MQTT shared "
        "subscription, run each as `run --workers` runs a shard (in-process, a store of "
        "its own) and send the results back to the runner, signed with the run key. "
        "Start any number, on any machine that reaches the broker; each runs one batch "
        "at a time and holds at most one more. A worker that dies has its batch handed to another.",
    )
    w.add_argument("--broker", required=True, metavar="URL", help="mqtt://HOST:PORT or mqtts://...")
    w.add_argument(
        "--run",
        type=run_id_arg,
        default=ANY,
        metavar="RUN_ID|any",
        help="serve this run and leave when it is over, or `any` run under the key, until "
        "stopped (default: any)",
    )
    w.add_argument(
        "--key-file",
        type=path_arg,
        metavar="PATH",
        help="the run key the runner was given (default: $ERRORFLOW_RUN_KEY)",
    )
    w.add_argument("--name", help="this worker's name, unique per broker (default: HOST-PID)")
    w.set_defaults(func=cmd_worker)
