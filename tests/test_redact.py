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
    # environment style: a secret word as one part of the name, not only at its end
    ("HTTP 401: SECRET_KEY=EnvSecret321 rejected", "EnvSecret321"),
    ("export AWS_SECRET_ACCESS_KEY='wJalrXUtnFEMI/K7MDENG'", "wJalrXUtnFEMI"),
    ('DB_PASS="hunter2" DB_HOST=db', "hunter2"),
    ("AUTH=dXNlcjpwYXNz", "dXNlcjpwYXNz"),
    ("GITHUB_TOKEN_RO = ghx9abc", "ghx9abc"),
    ("KEY=k3y-value", "k3y-value"),
    ("--db-passphrase=correct-horse", "correct-horse"),
    ("x=SECRET_KEY=nested42", "nested42"),  # a value that holds the next pair
    ("secret_key=lower-case-too", "lower-case-too"),
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
        "monkey=banana bypass=1 compass=north keyboard=us",  # the word inside a part
        "retries=3 timeout_s=2 max_tokens=1024 output_tokens=7",
        "HTTP 401 Unauthorized: API key expired (key=[REDACTED_KEY])",  # redacted already
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


def test_environment_style_pairs_keep_their_names_and_the_text_around() -> None:
    assert redact("boot: SECRET_KEY=EnvSecret321 DEBUG=1; AUTH_TOKEN=t0k, next") == (
        "boot: SECRET_KEY=[REDACTED] DEBUG=1; AUTH_TOKEN=[REDACTED], next"
    )
    assert redact_obj({"error_text": "SECRET_KEY=EnvSecret321"}) == {
        "error_text": "SECRET_KEY=[REDACTED]"
    }


def test_long_runs_of_name_or_scheme_characters_are_scanned_in_linear_time() -> None:
    """The recorder redacts up to 64 KiB of every rejected message. Patterns that began
    at each `_` or `.` of a long run backtracked quadratically (64 KiB of `a_` took
    minutes, of `a.` 3 s); the scans are one pass each (bounded by the test timeout)."""
    runs = ["a_" * 100_000, "a_" * 100_000 + "=x", "a." * 100_000, "a-" * 100_000 + "://x",
            "k=" * 100_000, "-" * 200_000 + "=", "a_password: " * 20_000]  # fmt: skip
    for text in runs:
        assert len(redact.__wrapped__(text)) > 0


def test_a_url_is_found_by_its_scheme_as_before() -> None:
    assert redact("x.postgres://u:p@h/db and -redis://:pw@cache") == (
        "[REDACTED_URL] and -[REDACTED_URL]"
    )
    assert redact("1abc://u:p@h") == "1abc://u:p@h"  # no scheme starts at a digit
