"""Redaction of secrets, connection strings and absolute paths."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from errorflow.core.redact import (
    _patterns_applied,
    _secret_key,
    might_hold_secret,
    redact,
    redact_json,
    redact_obj,
)

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
    # the common vendor shapes
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwx", "11ABCDEFG0123456789"),
    ("gho_16C7e42F292c6912E7710c838347Ae178B4a", "16C7e42F292c6912E7710c838347Ae178B4a"),
    ("ghr_1B4a2e77838347a7E420ce178F2E7c6912E169246", "1B4a2e77838347a7E420ce"),
    ("xoxe-1-My0xLTEyMzQ1Ni0x", "My0xLTEyMzQ1Ni0x"),
    ("xapp-1-A0123456789-0123456789-abcdef", "A0123456789"),
    ("sk-proj-Ab3dEf6hIj9kLm2nOp5q", "Ab3dEf6hIj9kLm2nOp5q"),
    ("glpat-xxxxXXXXxxxx1234abcd", "xxxxXXXXxxxx1234abcd"),
    ("npm_abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnopqrstuvwxyz0123456789"),
    ("hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "abcdefghijklmnopqrstuvwxyzABCDEFGH"),
    ("ASIAY34FZKBOKMUTVV7A", "Y34FZKBOKMUTVV7A"),
    ("SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789abcdefg", "SG.abcdef"),
    ("eyJhbGciOiJub25lIn0.eyJzdWIiOiIxMjM0In0.", "eyJzdWIiOiIxMjM0In0"),  # unsigned
    (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF0\n-----END PGP PRIVATE KEY BLOCK-----",
        "lQOYBF0",
    ),
    ("git clone https://ghx0aBcDeFgHiJkLmNoPqRs@github.com/o/r", "ghx0aBcDeFgHiJkLmNoPqRs"),
    ("Server=db;AccountKey=abc123==;", "abc123"),  # camelCase parts
    ("dbPassword=hunter2", "hunter2"),
    ("X-Amz-Signature=0a1b2c3d", "0a1b2c3d"),
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
        # names that only begin like a vendor's key
        "pk_customer_id sk_order_total hf_model_downloader npm_package_lookup task_sk-1",
        "ssh://git@github.com/o/r and ftp://anonymous@ftp.example.com",
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
        assert len(_patterns_applied(text)) > 0
        might_hold_secret(text)


def test_a_url_is_found_by_its_scheme_as_before() -> None:
    assert redact("x.postgres://u:p@h/db and -redis://:pw@cache") == (
        "[REDACTED_URL] and -[REDACTED_URL]"
    )
    assert redact("1abc://u:p@h") == "1abc://u:p@h"  # no scheme starts at a digit


# Pieces that make and break the patterns' matches, and the characters between them.
_PIECES = st.sampled_from(
    ["sk-", "sk_live_", "pk_test_", "ghp_", "github_pat_", "xoxb-", "xapp-", "glpat-", "npm_",
     "hf_", "pypi-", "ya29.", "SG.", "AKIA", "ASIA", "AIza", "eyJ", "eyJhbGciOi.", "Bearer",
     "-----BEGIN ", "PGP ", "PRIVATE KEY", " BLOCK", "-----", "://", "postgres", "user", ":",
     "@", "/", "//", "\\", "C:", "file", "=", "'", '"', " ", "\n", "\t", "_", "-", ".", "key",
     "KEY", "Key", "api", "access", "private", "secret", "Secret", "token", "Token", "tokens",
     "pass", "Pass", "word", "passwd", "pwd", "auth", "orization", "credential", "s", "cookie",
     "signature", "phrase", "[REDACTED", "[PATH", "]", "abcdefgh", "ABCDEFGHIJKLMNOP",
     "0123456789" * 4, "x", "é", "\u212a", "\u017f", "\u0130", "\u0131", "\u2003", "db", ","]
)  # fmt: skip
_TEXTS = st.lists(_PIECES | st.text("aAkK_-=:/ \"'\\\nzé", max_size=3), max_size=12).map("".join)


@settings(max_examples=1000, derandomize=True, deadline=None)
@given(_TEXTS)
def test_the_pre_check_says_no_only_where_redaction_changes_nothing(text: str) -> None:
    """`might_hold_secret` lets hot paths skip the patterns: it must never miss what
    `redact` (or a secret mapping key) would change, in the text or in its JSON."""
    if _patterns_applied(text) != text:
        assert might_hold_secret(text)
        assert might_hold_secret(json.dumps({"k": [text]}, ensure_ascii=False))
    if _secret_key(text):
        assert might_hold_secret(json.dumps({text: "v"}, ensure_ascii=False))


def test_the_pre_check_clears_the_envelopes_runs_are_made_of() -> None:
    """What keeps the bus's and the store's net cheap: ordinary envelopes go unparsed."""
    envelopes = [
        {"type": "model_call", "agent": "triage", "input_tokens": 450, "output_tokens": 80},
        {"code": "unknown_tool", "tool": "stock_level_v2", "message": "stock_level_v2: unknown"},
        {"answer": {"claims": [{"key": "quote", "value": {"ok": True, "sku": "SKU-2002"}}],
                    "text": "Found quote. Could not get stock_north.", "flags": []},
         "trace": {"costs": {"backend_calls": 1.0, "input_tokens": 1042.0}}},
        {"error": "HTTP 401 Unauthorized: API key expired (key=[REDACTED_KEY])"},
        {"task": "desk-3", "prompt": "Write a short literature report on transformer attention."},
    ]  # fmt: skip
    for payload in envelopes:
        assert not might_hold_secret(json.dumps(payload, separators=(",", ":"))), payload


def test_json_text_is_redacted_as_data_and_clean_text_is_kept_as_it_is() -> None:
    clean = '{"a":"b","n":[1,2.5]}'
    assert redact_json(clean) is clean
    text = json.dumps({"prompt": 'see "postgres://u:p@h/x"\n', "password": "hunter2"})
    assert json.loads(redact_json(text)) == {
        "prompt": 'see "[REDACTED_URL]"\n',
        "password": "[REDACTED]",
    }
    assert redact_json("token=abc, not JSON") == "token=[REDACTED], not JSON"


def test_the_memos_keep_only_short_texts_and_names() -> None:
    """Hostile traffic full of long distinct texts or mapping keys must not fill the
    memos: past `MEMO_LONGEST` they are redacted as well, and not kept."""
    from errorflow.core import redact as module

    module._REDACTED.clear()  # (full after other tests: nothing added then)
    module._SECRET_NAME.clear()
    texts, names = module._REDACTED.size(), module._SECRET_NAME.size()
    long_text = "x" * module.MEMO_LONGEST + " password=hunter2"
    long_key = "k" * module.MEMO_LONGEST + "_token"
    assert "hunter2" not in redact(long_text)
    assert redact_obj({long_key: "v"}) == {long_key: "[REDACTED]"}
    assert module._REDACTED.size() == texts
    assert module._SECRET_NAME.size() == names
    short = "password=memo-check-31e9"
    assert redact(short) == redact(short) != short
    assert module._REDACTED.size() == texts + 1
    assert redact_obj({"api_key": "v", "other": "w"}) == {"api_key": "[REDACTED]", "other": "w"}
    assert module._SECRET_NAME.size() == names + 2
