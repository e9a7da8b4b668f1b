"""A least-privilege Mosquitto configuration for one run of a scenario.

On a shared broker any client that can connect could publish on any run's topics, so
the configuration gives every participant its own user and lets it publish only where
its role needs (errorflow/protocol/topics.py has the layout):

- agent X writes the inboxes it sends to (`sends_to`, its manager's for a delegate, or
  the runner's for a terminal agent, plus `returns_to` and its `delegates`), its own
  `events/X` and `control/X`, and the acks for those who send it work (upstream agents
  or the runner, reviewers that return work to it, its delegates); it reads its inbox,
  the runner's control topic and its acks;
- the runner (which also runs the recorder) writes every agent's inbox (the entry
  agents get the task; an agent that restarts mid-run gets the inputs of its
  unfinished trials again, as their senders signed them), its own events and control
  topics and the acks for the terminal agents; it reads the run;
- the observer (`tui --attach`, `mosquitto_sub`) reads the run and writes nothing.

Passwords go into Mosquitto's password file as PBKDF2-HMAC-SHA512 hashes (its `$7$`
format, as `mosquitto_passwd` writes them); the clear passwords, and the run key that
signs envelopes, go into one env file per participant readable by its owner only.

Mosquitto started as root drops to user `mosquitto` before it reads the password and
ACL files: the directory must be searchable by that user (it is created 0755), the ACL
is world-readable (topic names only) and the password file is readable by the owner
and, when generated as root, by the `mosquitto` group only.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import pwd
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from errorflow.bus.url import PASSWORD_ENV, USER_ENV
from errorflow.core.errors import InputError
from errorflow.protocol import signing, topics
from errorflow.scenario.spec.model import Scenario

OBSERVER = "observer"
#: Mosquitto's default is 101; every connect pays for the iterations once.
PBKDF2_ITERATIONS = 20_000
SALT_BYTES = 12
HASH_BYTES = 64
BROKER_SYSTEM_USER = "mosquitto"
RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
HOST_PATTERN = re.compile(r"[A-Za-z0-9_.:\-]{1,253}")  # a name or an IPv4/IPv6 address

CONF_FILE, PASSWD_FILE, ACL_FILE, KEY_FILE = "mosquitto.conf", "passwd", "acl", "run.key"
PUBLIC_MODE, BROKER_SECRET_MODE, OWNER_ONLY_MODE, DIR_MODE = 0o644, 0o640, 0o600, 0o755


class BrokerConfigError(InputError, ValueError):
    """A configuration that cannot be written; `what` is the input at fault: "run_id",
    "directory", "host", "port" or "scenario"."""

    def __init__(self, message: str, what: str) -> None:
        super().__init__(message)
        self.what = what


@dataclass(frozen=True)
class BrokerUser:
    """One participant's broker account: the topics it may publish and subscribe to."""

    name: str
    writes: tuple[str, ...]
    reads: tuple[str, ...]


@dataclass(frozen=True)
class BrokerFiles:
    """What `write_broker_config` wrote; `env_files` by participant name."""

    directory: Path
    conf: Path
    passwd: Path
    acl: Path
    run_key: Path
    env_files: dict[str, Path]


def _unique(items: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _agent_user(scenario: Scenario, run_id: str, name: str) -> BrokerUser:
    spec = scenario.agents[name]
    peers = scenario.peers_of(name)  # a discussion's rounds go both ways
    targets = (
        (scenario.result_targets(name) if scenario.decides(name) else [])
        + ([spec.returns_to] if spec.returns_to else [])
        + list(spec.delegates)
        + peers
    )
    returners = [n for n, a in scenario.agents.items() if a.returns_to == name]
    senders = (
        (scenario.upstream_of(name) or [topics.RUNNER]) + returners + list(spec.delegates) + peers
    )
    writes = (
        [topics.inbox(run_id, t) for t in targets]
        + [topics.events(run_id, name), topics.control(run_id, name)]
        + [topics.acks(run_id, s) for s in senders]
    )
    reads = [
        topics.inbox(run_id, name),
        topics.control(run_id, topics.RUNNER),
        topics.acks(run_id, name),
    ]
    return BrokerUser(name, _unique(writes), _unique(reads))


def _runner_user(scenario: Scenario, run_id: str) -> BrokerUser:
    writes = (
        [topics.inbox(run_id, a) for a in scenario.agents]
        + [topics.events(run_id, topics.RUNNER), topics.control(run_id, topics.RUNNER)]
        + [topics.acks(run_id, a) for a in scenario.terminal_agents()]
    )
    return BrokerUser(topics.RUNNER, _unique(writes), (topics.run_filter(run_id),))


def broker_users(scenario: Scenario, run_id: str) -> list[BrokerUser]:
    """Every participant of a run of `scenario`: its agents, the runner, the observer."""
    check_run_id(run_id)
    if OBSERVER in scenario.agents:
        raise BrokerConfigError(
            f"an agent is named {OBSERVER!r}, the read-only broker user's name; "
            "expected another agent name",
            "scenario",
        )
    agents = [_agent_user(scenario, run_id, name) for name in scenario.agents]
    observer = BrokerUser(OBSERVER, (), (topics.run_filter(run_id),))
    return [*agents, _runner_user(scenario, run_id), observer]


def check_run_id(run_id: str) -> None:
    """A run id is one topic level: no `/`, `+`, `#`, spaces or newlines."""
    if not RUN_ID_PATTERN.fullmatch(run_id):
        raise BrokerConfigError(
            f"expected 1 to 64 letters, digits, '.', '_' or '-' (one topic level), "
            f"found {run_id!r}",
            "run_id",
        )


def acl_text(users: list[BrokerUser], header: str = "") -> str:
    """Mosquitto's ACL file: one `user` block per participant, nothing for anyone else."""
    lines = [f"# {line}" for line in header.splitlines()]
    for user in users:
        lines += ["", f"user {user.name}"]
        lines += [f"topic write {t}" for t in user.writes]
        lines += [f"topic read {t}" for t in user.reads]
    return "\n".join(lines).lstrip("\n") + "\n"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def password_line(
    user: str, password: str, *, salt: bytes | None = None, iterations: int = PBKDF2_ITERATIONS
) -> str:
    """One password file line in Mosquitto's `$7$` format (PBKDF2-HMAC-SHA512)."""
    salt = salt if salt is not None else secrets.token_bytes(SALT_BYTES)
    key = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations, HASH_BYTES)
    return f"{user}:$7${iterations}${_b64(salt)}${_b64(key)}"


def password_matches(line: str, password: str) -> bool:
    """Whether a `$7$` password file line accepts `password` (as Mosquitto checks it)."""
    _user, _, hashed = line.strip().partition(":")
    parts = hashed.split("$")
    if len(parts) != 5 or parts[1] != "7":
        return False
    iterations, salt, expected = int(parts[2]), base64.b64decode(parts[3]), parts[4]
    key = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations, HASH_BYTES)
    return hmac.compare_digest(_b64(key), expected)


#: Per-client queue on the broker (`mosquitto_conf`).
MAX_QUEUED_MESSAGES = 100_000


def mosquitto_conf(directory: Path, host: str, port: int, header: str = "") -> str:
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [
        f"listener {port} {host}",
        "allow_anonymous false",
        f"password_file {directory / PASSWD_FILE}",
        f"acl_file {directory / ACL_FILE}",
        "persistence false",
        "set_tcp_nodelay true",
        # Mosquitto drops QoS 1 messages for a client more than 1,000 behind (its default):
        # the recorder hears every message of a run, and a busy moment must not cost it
        # events. Bounded still, so a stalled client cannot exhaust the broker.
        f"max_queued_messages {MAX_QUEUED_MESSAGES}",
    ]
    return "\n".join(lines) + "\n"


def env_text(user: str, password: str, run_key: bytes | None) -> str:
    """KEY=VALUE lines (no quoting needed: the values are URL-safe), for `. FILE` with
    `set -a`, `env $(cat FILE)` or systemd's EnvironmentFile."""
    lines = [f"{USER_ENV}={user}", f"{PASSWORD_ENV}={password}"]
    if run_key is not None:
        lines.append(f"{signing.KEY_ENV}={signing.key_to_text(run_key)}")
    return "\n".join(lines) + "\n"


def _write(path: Path, text: str, mode: int) -> None:
    """Create `path` afresh with exactly `mode`: an older file is removed first, so a
    secret is never written into a file that was more open."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), mode)  # the umask may have narrowed it
        f.write(text)


def _share_with_broker(path: Path) -> None:
    """As root, let the `mosquitto` group (the user Mosquitto drops to) read `path`."""
    if os.geteuid() != 0:
        return
    try:
        gid = pwd.getpwnam(BROKER_SYSTEM_USER).pw_gid
    except KeyError:
        return
    os.chown(path, 0, gid)


def _prepare(directory: Path, force: bool) -> None:
    if directory.exists() and not directory.is_dir():
        raise BrokerConfigError("expected a directory, found a file", "directory")
    if directory.is_dir():
        if any(directory.iterdir()) and not force:
            raise BrokerConfigError(
                "the directory is not empty; expected a new or empty one "
                "(--force replaces the files it writes there)",
                "directory",
            )
        return
    directory.mkdir(parents=True)
    directory.chmod(DIR_MODE)  # searchable by the broker's user (mkdir obeys the umask)


def write_broker_config(
    scenario: Scenario,
    run_id: str,
    directory: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 1883,
    force: bool = False,
) -> BrokerFiles:
    """Write mosquitto.conf, passwd, acl, run.key and one NAME.env per participant."""
    users = broker_users(scenario, run_id)
    if not 1 <= port <= 65535:
        raise BrokerConfigError(f"expected a port from 1 to 65535, found {port}", "port")
    if not HOST_PATTERN.fullmatch(host):
        raise BrokerConfigError(f"expected a host name or address, found {host!r}", "host")
    directory = directory.absolute()
    if "\n" in str(directory):
        raise BrokerConfigError("expected a path without a newline", "directory")
    _prepare(directory, force)
    header = f"errorflow broker-config: scenario {scenario.name}, run {run_id}"
    run_key = signing.new_key()
    passwords = {u.name: secrets.token_urlsafe(24) for u in users}
    files = BrokerFiles(
        directory=directory,
        conf=directory / CONF_FILE,
        passwd=directory / PASSWD_FILE,
        acl=directory / ACL_FILE,
        run_key=directory / KEY_FILE,
        env_files={u.name: directory / f"{u.name}.env" for u in users},
    )
    _write(files.conf, mosquitto_conf(directory, host, port, header), PUBLIC_MODE)
    _write(files.acl, acl_text(users, header), PUBLIC_MODE)
    lines = [password_line(name, password) for name, password in passwords.items()]
    _write(files.passwd, "\n".join(lines) + "\n", BROKER_SECRET_MODE)
    _share_with_broker(files.passwd)
    files.run_key.unlink(missing_ok=True)
    signing.write_key_file(files.run_key, run_key)
    for name, path in files.env_files.items():
        # the observer only reads: it gets no key that could sign a message
        key = None if name == OBSERVER else run_key
        _write(path, env_text(name, passwords[name], key), OWNER_ONLY_MODE)
    return files


def unreachable_parent(directory: Path) -> Path | None:
    """The first directory on the way to `directory` that other users cannot search
    (Mosquitto running as user `mosquitto` could not open the files), or None."""
    for parent in [*reversed(directory.absolute().parents), directory.absolute()]:
        if not parent.stat().st_mode & stat.S_IXOTH:
            return parent
    return None
