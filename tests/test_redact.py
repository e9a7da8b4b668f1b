"""Redaction of secrets, connection strings and absolute paths."""

from __future__ import annotations

import pytest

from errorflow.core.redact import redact, redact_obj

LEAKS = [
    ("HTTP 401: key=sk-live-4f9a8b7c6d5e4f3a2b1c", "sk-live-4f9a8b7c6d5e4f3a2b1c"),
    ("x-api-key sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4", "Zx9Yw8Vu7Ts6Rq5Po4"),
    ("stripe sk_live_51Habcdefghijk", "51Habcdefghijk"),
    ("connect postgres://user:pass@db.internal:5432/x failed", "user:pass"),
    ("connect postgres://user:pass@db.internal:5432/x failed", "db.internal"),
    ("redis://:hunter2@cache:6379/0", "hunter2"),
    ("mongodb+srv://admin:s3cr3t@cluster0.mongodb.net/db", "s3cr3t"),
    ("open '/home/alice/.config/creds.json'", "alice"),
    ("at /Users/bob/src/app/main.py:12", "bob"),
    ("file:///home/alice/x.txt", "alice"),
    (r"C:\Users\alice\creds.json", "alice"),
    ("db_password=hunter2 host=db", "hunter2"),
    ("client_secret: abcdef", "abcdef"),
    ('{"api_key": "abc123"}', "abc123"),
    ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
    ("Authorization: Bearer abc.def.ghi123", "abc.def.ghi123"),
    ("ghp_abcdefghijklmnop1234", "abcdefghijklmnop1234"),
    ("xoxb-1234567890-abcdef", "1234567890-abcdef"),
    ("AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig_nature", "eyJzdWIiOiIxMjM0In0"),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
        "MIIEpAIBAAKCAQEA",
    ),
]


@pytest.mark.parametrize(("text", "secret"), LEAKS)
def test_secret_is_removed(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert "REDACTED" in out or "[PATH]" in out


@pytest.mark.parametrize(
    "text",
    [
        "HTTP 503 Service Unavailable",
        "HTTP 429 Too Many Requests (Retry-After: 1)",
        "Error: connect ETIMEDOUT metric-store.internal:443 (upstream did not answer)",
        "TypeError: Cannot read properties of undefined (reading 'name')",
        "input_tokens=120 max_tokens: 1024",
        "basic information, and/or 1/2 of a / b",
        "see https://example.com/docs/errors#rate-limit",
        "fin.rev.2024",
        "2024年营收",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_redaction_is_idempotent() -> None:
    for text, _ in LEAKS:
        once = redact(text)
        assert redact(once) == once


def test_redact_obj_walks_json_like_values() -> None:
    key = "sk-live-4f9a8b7c6d5e4f3a2b1c"
    value = {
        "error": f"bad key {key}",
        "items": [f"/home/alice/{i}.json" for i in range(2)],
        "pair": ("postgres://u:p@h/x", 3),
        "/srv/data/secret.txt": 1,
        "password": "plain-looking",
        "client_secret": "short",
        "api_key": 42,
        "input_tokens": 10,
        "n": None,
        "ok": True,
        "nested": {"token": "abc", "tags": {"a"}},
    }
    out = redact_obj(value)
    assert out == {
        "error": "bad key [REDACTED_KEY]",
        "items": ["[PATH]", "[PATH]"],
        "pair": ["[REDACTED_URL]", 3],
        "[PATH]": 1,
        "password": "[REDACTED]",
        "client_secret": "[REDACTED]",
        "api_key": 42,
        "input_tokens": 10,
        "n": None,
        "ok": True,
        "nested": {"token": "[REDACTED]", "tags": ["a"]},
    }
    assert value["password"] == "plain-looking"  # the input is not modified


def test_planted_secrets_from_the_issue() -> None:
    raw = (
        "OperationalError: postgres://user:pass@db.internal:5432/x refused; "
        "key sk-live-4f9a8b7c6d5e4f3a2b1c / sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4; "
        "creds at /home/alice/.config/creds.json"
    )
    out = redact_obj({"raw": raw, "trace": [{"raw": raw}]})
    text = str(out)
    for secret in (
        "user:pass",
        "db.internal",
        "sk-live",
        "sk-ant",
        "/home/alice",
        "creds.json",
    ):
        assert secret not in text
    assert out["raw"] == (
        "OperationalError: [REDACTED_URL] refused; key [REDACTED_KEY] / [REDACTED_KEY]; "
        "creds at [PATH]"
    )
