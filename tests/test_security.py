"""Secrets and access: a Mosquitto with a password file and a TLS listener (certificates
made here), and planted secrets searched for in everything errorflow writes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from errorflow.scenario.bundled import bundled
from tests.conftest import Mosquitto, free_port, require_mosquitto

PASSWORD = "pw-Sup3rSecret-4711"
API_KEY = "sk-ant-api03-NEVERSTOREME0123456789"
TOOL_SECRET = "postgres://svc:hunter2pass@db.internal:5432/prod"


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Mosquitto:
    require_mosquitto()
    if shutil.which("openssl") is None or shutil.which("mosquitto_passwd") is None:
        pytest.fail("openssl and mosquitto_passwd are needed (apt-get install openssl mosquitto)")
    d = tmp_path_factory.mktemp("tls")
    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=errorflow test CA",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        cwd=d,
    )
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name in ("server", "client"):
        openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            f"/CN={name}",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            cwd=d,
        )
        openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.cnf",
            "-out",
            f"{name}.pem",
            cwd=d,
        )
    subprocess.run(
        ["mosquitto_passwd", "-b", "-c", str(d / "pw"), "alice", PASSWORD],
        check=True,
        capture_output=True,
    )
    port = free_port()
    # As root, Mosquitto drops to its own user, which cannot read pytest's private
    # temp dir; a loopback test broker may keep root.
    user = "user root\n" if os.geteuid() == 0 else ""
    broker = Mosquitto(
        d,
        extra_config=(
            f"{user}listener {port} 127.0.0.1\nallow_anonymous false\npassword_file {d / 'pw'}\n"
            f"cafile {d / 'ca.pem'}\ncertfile {d / 'server.pem'}\nkeyfile {d / 'server.key'}\n"
            "require_certificate true\n"
        ),
        port=port,
    )
    broker.start()
    broker.tls_dir = d  # type: ignore[attr-defined]
    yield broker  # type: ignore[misc]
    broker.stop()


def url(broker: Mosquitto, password: str = PASSWORD) -> str:
    d = broker.tls_dir  # type: ignore[attr-defined]
    return (
        f"mqtts://alice:{password}@127.0.0.1:{broker.port}"
        f"?ca={d / 'ca.pem'}&cert={d / 'client.pem'}&key={d / 'client.key'}"
    )


def errorflow(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "errorflow", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_tls_and_password_and_no_secret_anywhere(tls_broker: Mosquitto, tmp_path: Path) -> None:
    d = tls_broker.tls_dir  # type: ignore[attr-defined]
    scen = tmp_path / "s.yaml"
    scen.write_text(
        bundled()["contamination"]
        .read_text()
        .replace(
            "HTTP 401 Unauthorized: API key expired (key=sk-live-4f9a8b7c6d5e4f3a2b1c)",
            f"HTTP 401 Unauthorized: connect {TOOL_SECRET} failed, see /home/alice/.pgpass",
        )
    )
    capture = tmp_path / "bus.txt"
    with capture.open("w") as fh:
        sniffer = subprocess.Popen(
            [
                "mosquitto_sub",
                "-h",
                "127.0.0.1",
                "-p",
                str(tls_broker.port),
                "-t",
                "errorflow/#",
                "-v",
                "-u",
                "alice",
                "-P",
                PASSWORD,
                "--cafile",
                str(d / "ca.pem"),
                "--cert",
                str(d / "client.pem"),
                "--key",
                str(d / "client.key"),
            ],
            stdout=fh,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(0.5)
        db = tmp_path / "s.db"
        run = errorflow(
            "-v",
            "run",
            str(scen),
            "--trials",
            "6",
            "--broker",
            url(tls_broker),
            "--db",
            str(db),
            "--json",
            env={"ANTHROPIC_API_KEY": API_KEY},
        )
        time.sleep(0.5)
        sniffer.terminate()
        sniffer.wait(5)
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert sum(data["outcomes"].values()) == 6 and data["outcomes"]["bus_fault"] == 0
    assert data["broker"] == f"mqtts://alice:***@127.0.0.1:{tls_broker.port}"
    bus = capture.read_text()
    assert bus.count(f"errorflow/{data['run_id']}/") > 20  # the sniffer saw the run
    written = {
        "store": b"".join(p.read_bytes() for p in tmp_path.glob("s.db*")).decode("latin-1"),
        "bus": bus,
        "stdout": run.stdout,
        "logs": run.stderr,
    }
    for secret in (PASSWORD, API_KEY, TOOL_SECRET, "hunter2pass", "/home/alice/.pgpass"):
        for where, text in written.items():
            assert secret not in text, f"{secret!r} leaked into the {where}"


@pytest.mark.slow
def test_wrong_password_and_plain_connections_are_refused(
    tls_broker: Mosquitto, tmp_path: Path
) -> None:
    wrong = errorflow(
        "run",
        "contamination",
        "--trials",
        "1",
        "--broker",
        url(tls_broker, "not-the-password"),
        "--db",
        str(tmp_path / "w.db"),
    )
    assert wrong.returncode == 1
    assert "cannot connect" in wrong.stderr and "not-the-password" not in wrong.stderr
    plain = errorflow(
        "run",
        "contamination",
        "--trials",
        "1",
        "--broker",
        f"mqtt://alice:{PASSWORD}@127.0.0.1:{tls_broker.port}",
        "--db",
        str(tmp_path / "p.db"),
    )
    assert plain.returncode == 1 and PASSWORD not in plain.stderr
