"""Secrets written anywhere in a scenario reach no subscriber of the broker, no column of
the store and no export: a real run on Mosquitto, every payload and every stored byte
searched. Every field gets its own secret of a common shape, so a leak names its field."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from errorflow.cli.main import main
from tests.conftest import Mosquitto

#: Field → (the secret's shape, the mark only that secret holds). Marks are capitals
#: and digits, so that every shape can carry one (AKIA takes nothing else).
SHAPES = {
    "description": "client_secret: {m}",
    "prompt_token": "ghp_{m}",
    "prompt_url": "postgres://admin:{m}@db.example.com:5432/app",
    "wording": "AKIA{m}",
    "instructions": "sk-proj-{m}",
    "writer_instructions": "eyJhbGciOiJIUzI1NiJ9.eyJ{m}.sig{m}",
    "tool_description": "xoxb-1234-{m}",
    "arg_description": "Authorization: Bearer {m}",
    "arg_default": "token={m}",
    "error_text": "-----BEGIN RSA PRIVATE KEY-----\nMII{m}\n-----END RSA PRIVATE KEY-----",
    "reason": "refused: password={m}",
    "metric_name": "sk-live-{m}",
    "metric_value": "api_key={m}",
    "paper_title": "sk-ant-api03-{m}",
    "document": "AWS key AKIA{m} and SECRET_KEY={m}",
    "cell": "Bearer {m}",
    "expect": "xoxp-2222-{m}",
    "dsn": "postgres://svc:{m}@db.internal:5432/prod",
    "tool_result": "mysql://tool:{m}@cache:3306/x",
    "tool_error": "github_pat_11AB{m}",
    "reference": "https://ci:{m}@ci.example.com/",
}
MARKS = {field: f"Q{i:02d}ZX7KW4PL9MR3T" for i, field in enumerate(SHAPES)}
SECRETS = {field: shape.format(m=MARKS[field]) for field, shape in SHAPES.items()}

TOOL = '''
DSN = {dsn!r}


def stock(dsn: str, sku: str, note: str = "") -> dict:
    """Answers only to the real connection string: what the model and the bus see is
    redacted, what the tool is called with is not."""
    if dsn != DSN:
        raise PermissionError("no access with that DSN; " + {tool_error!r})
    if sku != "SKU-1":
        return {{"ok": False, "reason": "unknown sku on " + {tool_result!r}}}
    return {{"ok": True, "sku": sku, "count": 42, "source": {tool_result!r}}}
'''


def scenario_text() -> str:
    s = {k: json.dumps(v) for k, v in SECRETS.items()}  # YAML's flow scalars are JSON's
    return f"""
name: secrets-everywhere
description: {s["description"]}
seed: 11
trials: 12
world:
  metrics: {{rev.q3: 1650, {s["metric_name"]}: {s["metric_value"]}}}
  papers: [{{id: p1, title: {s["paper_title"]}, topic: attention}}]
  documents: {{doc1: {s["document"]}}}
  tables:
    creds:
      rows:
        - {{id: C-1, owner: {s["cell"]}}}
        - {{id: C-2, owner: {s["expect"]}}}
tools:
  kpi:
    kind: metric_store
    description: {s["tool_description"]}
    faults:
      - {{kind: permission, status: 401, p: 0.05, error_text: {s["error_text"]}}}
      - {{kind: business_rule, p: 0.05, reason: {s["reason"]}}}
  cred:
    kind: lookup
    table: creds
    returns: [owner]
    args: {{id: {{type: string, description: {s["arg_description"]}}}}}
    faults: [{{kind: timeout, p: 0.05}}]
  docs: {{kind: batch_fetch}}
  stock:
    kind: python
    function: dbtool.py:stock
    business_failure: {{field: ok, equals: false, reason_field: reason}}
    args:
      dsn: {{type: string}}
      sku: {{type: string}}
      note: {{type: string, required: false, default: {s["arg_default"]}}}
    faults: [{{kind: bad_args, p: 0.2}}]
agents:
  researcher:
    role: researcher
    instructions: {s["instructions"]}
    tools: [kpi, docs, stock]
    sends_to: [reviewer]
    faults: [{{kind: corrupt, p: 0.1}}]
  reviewer:
    role: reviewer
    tools: [kpi, docs, stock]
    returns_to: researcher
    sends_to: [writer]
  writer:
    role: writer
    instructions: {s["writer_instructions"]}
    tools: [cred]
task:
  prompt: {json.dumps(f"How was Q3? Use {SECRETS['prompt_token']} on {SECRETS['prompt_url']}")}
  needs:
    - {{id: revenue, tool: kpi, wording: {s["wording"]}, value: rev.q3}}
    - {{id: note, tool: kpi, wording: the note, value: {s["metric_name"]}}}
    - {{id: doc, tool: docs, arg: ids, wording: the document, value: [doc1]}}
    - {{id: owner, tool: cred, wording: the owner, args: {{id: C-1}}}}
    - {{id: expected, tool: cred, wording: the other owner, args: {{id: C-2}},
       expect: {s["expect"]}}}
    - {{id: stock, tool: stock, wording: the stock, args: {{dsn: {s["dsn"]}, sku: SKU-1}}}}
reference: {{source: {s["reference"]}, note: {s["reference"]}}}
"""


class Sniffer:
    """A client subscribed to `#` that keeps every payload it hears."""

    def __init__(self, broker: Mosquitto) -> None:
        self.payloads: list[bytes] = []
        self.subscribed = threading.Event()
        self.client = paho.Client(CallbackAPIVersion.VERSION2)
        self.client.on_connect = lambda c, *_: c.subscribe("#", qos=1)
        self.client.on_subscribe = lambda *_: self.subscribed.set()
        self.client.on_message = lambda _c, _u, msg: self.payloads.append(bytes(msg.payload))
        self.client.connect("127.0.0.1", broker.port)
        self.client.loop_start()
        assert self.subscribed.wait(10)

    def stop(self) -> bytes:
        self.client.loop_stop()
        self.client.disconnect()
        return b"\n".join(self.payloads)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(list(args))
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out + out.err


def leaks(where: str, data: bytes | str) -> list[str]:
    text = data.decode("latin-1") if isinstance(data, bytes) else data
    return [f"{field} in {where}" for field, mark in MARKS.items() if mark in text]


def stored_cells(db: Path) -> str:
    """Every value of every column of every table, as text."""
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return "\n".join(
            str(value)
            for table in tables
            for row in conn.execute(f"SELECT * FROM {table}")
            for value in row
        )


def test_a_secret_in_any_field_reaches_no_subscriber_row_or_export(
    mosquitto: Mosquitto, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "dbtool.py").write_text(TOOL.format(**SECRETS))
    scen = tmp_path / "s.yaml"
    scen.write_text(scenario_text())
    db = tmp_path / "s.db"
    sniffer = Sniffer(mosquitto)
    try:
        out = cli(capsys, "run", str(scen), "--broker", str(mosquitto.url), "--db", str(db),
                  "--json", "-q")  # fmt: skip
    finally:
        bus = sniffer.stop()
    run = json.loads(out[: out.rindex("}") + 1])
    run_id = run["run_id"]
    assert bus.count(run_id.encode()) > 100  # the sniffer heard the run

    found = leaks("the bus", bus) + leaks("the run's output", out)
    files = b"".join(p.read_bytes() for p in tmp_path.glob("s.db*") if p.is_file())
    found += leaks("the store's file", files)
    found += leaks("the store's columns", stored_cells(db))
    exports: dict[str, str] = {}
    for trial in range(run["trials"]):
        exports[f"trace {trial}"] = cli(capsys, "trace", run_id, "--trial", str(trial),
                                        "--db", str(db))  # fmt: skip
        exports[f"trace --json {trial}"] = cli(
            capsys, "trace", run_id, "--trial", str(trial), "--json", "--db", str(db)
        )
    for fmt in ("who-when", "otlp-json"):
        exports[fmt] = cli(capsys, "export", run_id, "--format", fmt, "--db", str(db))
    cli(capsys, "export", run_id, "--format", "who-when", "-o", str(tmp_path / "ww"), "--db",
        str(db))  # fmt: skip
    exports["who-when files"] = "".join(p.read_text() for p in (tmp_path / "ww").iterdir())
    for fmt in ("md", "json", "csv", "html"):
        exports[f"report {fmt}"] = cli(capsys, "report", run_id, "--format", fmt, "--db", str(db))
    exports["show"] = cli(capsys, "show", run_id, "--db", str(db))
    for name, text in exports.items():
        found += leaks(name, text)
    assert found == []

    # Redaction changed what is shown, not what happened: the Python tool was called
    # with the real connection string, and answers that hold secrets still matched the
    # ground truth (which the scorer compares in the form the model could see).
    assert "[REDACTED" in bus.decode()
    with sqlite3.connect(db) as conn:
        stored = [json.loads(r[0]) for r in conn.execute("SELECT envelope FROM messages")]
    claims = [c for env in stored for c in env["payload"].get("answer", {}).get("claims", [])]
    assert any(c["key"] == "stock" and c["value"]["ok"] is True for c in claims)
    assert run["outcomes"]["success"] > 0


def test_a_name_shaped_like_a_secret_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name travels as it is (topics, senders, claim keys), so one that redaction would
    change is refused, in one line, with exit code 2, and nothing is run or stored."""
    (tmp_path / "dbtool.py").write_text(TOOL.format(**SECRETS))
    scen = tmp_path / "s.yaml"
    name = "xoxb-1234-WriterNameToken"  # an agent's name: letters, digits and dashes
    text = scenario_text().replace("  writer:\n", f"  {name}:\n")
    scen.write_text(text.replace("sends_to: [writer]", f"sends_to: [{name}]"))
    code = main(["run", str(scen), "--db", str(tmp_path / "s.db")])
    err = capsys.readouterr().err
    assert code == 2
    assert "a name shaped like a secret" in err
    assert not (tmp_path / "s.db").exists()
