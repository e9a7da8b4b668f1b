"""`errorflow broker-config`: a least-privilege Mosquitto configuration for one run."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from errorflow.cli.args import port as port_number
from errorflow.cli.command_table import summary
from errorflow.cli.console import out
from errorflow.cli.errors import EXIT_OK, UsageError
from errorflow.cli.paths import path_arg
from errorflow.cli.scenario_input import load_ref
from errorflow.runtime.broker_config import (
    OBSERVER,
    BrokerConfigError,
    BrokerFiles,
    unreachable_parent,
    write_broker_config,
)
from errorflow.runtime.runner import new_run_id

DESCRIPTION = """\
Write a Mosquitto configuration for one run of SCENARIO on a shared broker: no
anonymous clients, one user per agent plus `runner` and `observer`, and an ACL that lets
each publish only where its role needs (its outgoing inboxes, its own events and
control topics, its acks); the observer only reads. An agent publishing elsewhere is
refused by the broker (its message is dropped, never delivered).

DIR gets mosquitto.conf, passwd (hashed passwords), acl, run.key (the run's signing
key) and one NAME.env per participant (mode 0600) with ERRORFLOW_MQTT_USERNAME,
ERRORFLOW_MQTT_PASSWORD and ERRORFLOW_RUN_KEY (not for the observer). Load an env file
into the participant's environment only, e.g. `(set -a; . DIR/writer.env; exec
errorflow agent ...)`, `env $(cat DIR/writer.env) errorflow agent ...` (the secrets are
then briefly visible in `ps`) or systemd's EnvironmentFile=; never on a command line.

The configuration holds one run id: run `errorflow run --run-id ID --external-agents`
with a single propagation (`both` runs two runs). Mosquitto started as root reads
passwd and acl as user `mosquitto`: DIR and its parents must be searchable by it.
For other machines, listen on another --host and use TLS (a Mosquitto listener with
certfile/keyfile, and mqtts:// URLs)."""


def _sourced(env_file: Path, command: str) -> str:
    return f"(set -a; . {shlex.quote(str(env_file))}; exec {command})"


def next_steps(files: BrokerFiles, ref: str, run_id: str, host: str, port: int) -> list[str]:
    """The commands that start the broker and every participant of the run."""
    url = f"mqtt://[{host}]:{port}" if ":" in host else f"mqtt://{host}:{port}"
    scenario, run = shlex.quote(ref), shlex.quote(run_id)
    env = files.env_files
    agents = [name for name in env if name not in ("runner", OBSERVER)]
    lines = [f"mosquitto -c {shlex.quote(str(files.conf))}"]
    runner = f"errorflow run {scenario} --broker {url} --external-agents --run-id {run}"
    lines.append(_sourced(env["runner"], runner))
    for name in agents:
        agent = f"errorflow agent {scenario} --name {name} --broker {url} --run {run}"
        lines.append(_sourced(env[name], agent))
    watch = f"errorflow tui {scenario} --attach {run} --broker {url}"
    lines.append(_sourced(env[OBSERVER], watch))
    sub = (
        f'mosquitto_sub -h {host} -p {port} -u "$ERRORFLOW_MQTT_USERNAME" '
        f"-P \"$ERRORFLOW_MQTT_PASSWORD\" -t 'errorflow/{run_id}/#' -v"
    )
    lines.append(_sourced(env[OBSERVER], sub) + "  # -P shows the password in ps")
    return lines


def _where(what: str, args: argparse.Namespace, run_id: str) -> str:
    """The option a `BrokerConfigError` is about, as the user wrote it."""
    options = {
        "run_id": f"--run-id {run_id}",
        "directory": f"--dir {args.dir}",
        "host": f"--host {args.host}",
        "port": f"--port {args.port}",
    }
    return options.get(what, str(args.scenario))


def cmd_broker_config(args: argparse.Namespace) -> int:
    scenario = load_ref(args.scenario)
    run_id = args.run_id or new_run_id(scenario.name)
    directory = Path(args.dir)
    try:
        files = write_broker_config(
            scenario, run_id, directory, host=args.host, port=args.port, force=args.force
        )
    except BrokerConfigError as exc:
        raise UsageError(str(exc), where=_where(exc.what, args, run_id)) from None
    except OSError as exc:
        raise UsageError(
            f"cannot write there ({exc.strerror}); expected a writable directory",
            where=f"--dir {directory}",
        ) from None
    say = out.print
    say(
        f"wrote a Mosquitto configuration for run {run_id} in {files.directory}:",
        markup=False,
        highlight=False,
    )
    written = [files.conf, files.passwd, files.acl, files.run_key, *files.env_files.values()]
    for path in written:
        say(f"  {path.name:<16} {path.stat().st_mode & 0o777:04o}", markup=False)
    say("start the broker, then the runner and the agents (any order):", markup=False)
    for line in next_steps(files, args.scenario, run_id, args.host, args.port):
        say(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    blocked = unreachable_parent(files.directory)
    if blocked is not None:
        say(
            f"note: {blocked} is not searchable by other users: Mosquitto started as root "
            "(it then runs as user mosquitto) cannot read passwd and acl",
            markup=False,
            highlight=False,
        )
    return EXIT_OK


def add_broker_config_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    b = sub.add_parser(
        "broker-config",
        help=summary("broker-config"),
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    b.add_argument("scenario", type=path_arg, help="scenario file or bundled scenario name")
    b.add_argument("--run-id", help="the run the configuration is for (default: generated)")
    b.add_argument(
        "--dir", required=True, type=path_arg, metavar="DIR", help="where to write the files"
    )
    b.add_argument("--host", default="127.0.0.1", help="listener address (default: 127.0.0.1)")
    b.add_argument("--port", type=port_number, default=1883, help="listener port (default: 1883)")
    b.add_argument(
        "--force", action="store_true", help="replace the files in a directory that has some"
    )
    b.set_defaults(func=cmd_broker_config)
