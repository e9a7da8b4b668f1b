"""Strings from outside made safe for a terminal, Markdown and HTML: a corpus of hostile
strings, and the properties every one of them must have once made safe."""

from __future__ import annotations

import html
import json
import sys
import unicodedata

import pytest

from errorflow.core.display import (
    LIMIT,
    escape_char,
    for_terminal,
    html_text,
    json_text,
    md_text,
    signed_pct,
)

#: What each entry would do if it reached a terminal or a Markdown renderer as it is.
HOSTILE = [
    "\x1b]0;PWNED-TITLE\x07",  # OSC: set the window title, BEL-terminated
    "\x1b]0;PWNED\x1b\\",  # the same, ST-terminated
    "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "\x1b]52;c;cHduZWQ=\x07",  # OSC 52: write the clipboard
    "\x1b[?1049l",  # leave the alternate screen (the TUI's)
    "\x1b[?1049h\x1b[2J\x1b[H",  # enter it, clear, home
    "\x1b[31mred\x1b[0m",  # SGR colour
    "\x1b[6n",  # ask for the cursor position: the terminal types an answer
    "\x1bP+q544e\x1b\\",  # DCS request
    "\x1b_APC\x1b\\",  # APC
    "\x1bc",  # full reset
    "\x9b31m",  # 8-bit CSI (C1)
    "\x9d0;title\x9c",  # 8-bit OSC and ST
    "\x85next line",  # NEL
    "\x07\x07\x07",  # BEL
    "abc\x08\x08\x08xyz",  # backspace over what was shown
    "ok\rFAKE",  # carriage return: overwrite the line
    "tab\there",
    "two\nlines",
    "form\x0cfeed\x0bvtab",
    "nul\x00byte",
    "del\x7f",
    "\u202eevil.exe\u202c",  # right-to-left override
    "\u2066isolated\u2069\u2067rtl\u2069\u2068fsi\u2069",  # bidi isolates
    "\u202a\u202b\u202d",  # bidi embeddings and LTR override
    "\u200bzero\u200cwidth\u200d\ufeff",  # zero-width characters and the BOM
    "\u00adsoft hyphen",
    "line\u2028separator\u2029paragraph",
    "\U000e0041\U000e007f",  # tag characters
    "lone \ud800 surrogate",
    "\ufffe\uffff\ufdd0",  # noncharacters
    "[red]markup[/]",  # Rich markup
    "[/]",  # a closing tag with nothing open (Rich raises on it)
    "[link=https://evil.example]x[/link]",
    "\\[escaped]",
    "a|b|c",  # a Markdown table cell
    "`code` and ``more``",
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "&lt;script&gt;",  # entities that would decode
    "**bold** and *em* and _em_ and __strong__",
    "[click](javascript:alert(1))",
    "![img](https://tracker.example/p.png)",
    "~~strike~~",
    "trailing backslash \\",
    "back\\|slash",
    "x" * 100_000,  # very long
    ("\x1b]0;t\x07" * 20_000),  # very long and hostile
]

#: Shown exactly as they are: everything a real agent name, label or message holds.
SAFE = [
    "researcher",
    "transient/classify",
    "policy.retry.max_attempts=3",
    "t3 researcher → writer",
    "✗ contaminated ◐ contained ✓ clean",
    "café, naïve, Ærøskøbing",
    "日本語のテキスト",
    "🙂 emoji",
    "a b  c",
    "",
]

UNSAFE_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def unsafe(text: str) -> list[str]:
    """The characters a terminal must not be sent raw (by Unicode's own database)."""
    nonchars = {"\ufffe", "\uffff"} | {chr(c) for c in range(0xFDD0, 0xFDF0)}
    return [c for c in text if unicodedata.category(c) in UNSAFE_CATEGORIES or c in nonchars]


def md_unescape(text: str) -> str:
    """What a Markdown reader sees in `md_text`'s output: backslash escapes and the
    three entities undone. Fails on any markup character left unescaped."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            assert i + 1 < len(text), "a dangling backslash"
            out.append(text[i + 1])
            i += 2
            continue
        if c == "&":
            entity = next(e for e in ("&amp;", "&lt;", "&gt;") if text.startswith(e, i))
            out.append(html.unescape(entity))
            i += len(entity)
            continue
        assert c not in "|`*[]~<>\n", f"unescaped {c!r} in {text[:80]!r}"
        if c == "_":  # only inside a word (it never starts emphasis there)
            assert 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()
        out.append(c)
        i += 1
    return "".join(out)


@pytest.mark.parametrize("text", HOSTILE, ids=lambda t: repr(t[:24]))
def test_hostile_strings_leave_no_control_character(text: str) -> None:
    for multiline in (False, True):
        out = for_terminal(text, multiline=multiline)
        assert not [c for c in unsafe(out) if not (multiline and c in "\n\t")]
        assert for_terminal(out, multiline=multiline) == out  # idempotent
        assert len(out) <= LIMIT  # cut: a huge name costs no huge frame
    assert "\x1b" not in for_terminal(text, limit=None)


@pytest.mark.parametrize("text", SAFE)
def test_ordinary_strings_are_shown_as_they_are(text: str) -> None:
    assert for_terminal(text) == text
    assert html_text(text) == html.escape(text)


def test_controls_are_made_visible_not_dropped() -> None:
    assert for_terminal("\x1b]0;PWNED\x07") == "\\x1b]0;PWNED\\x07"
    assert for_terminal("\x1b[?1049l") == "\\x1b[?1049l"
    assert for_terminal("\x9b31m\x85") == "\\x9b31m\\x85"
    assert for_terminal("\u202eevil") == "\\u202eevil"
    assert for_terminal("a\nb\tc\rd") == "a\\nb\\tc\\rd"
    assert for_terminal("a\nb\tc\rd", multiline=True) == "a\nb\tc\\rd"
    assert for_terminal("\U000e0041") == "\\U000e0041"
    assert escape_char("\x00") == "\\x00" and escape_char("\ud800") == "\\ud800"


def test_long_strings_are_cut_and_say_so() -> None:
    note = "… (5000 chars)"
    assert for_terminal("x" * 5000) == "x" * (LIMIT - len(note)) + note
    assert for_terminal("x" * 5000, limit=None) == "x" * 5000
    assert for_terminal("x" * LIMIT) == "x" * LIMIT  # not cut: it fits
    # escapes count: 300 ESC are 1200 characters on the screen
    assert len(for_terminal("\x1b" * 300)) == LIMIT
    assert for_terminal("\x1b" * 10, limit=None) == "\\x1b" * 10


def test_every_unsafe_character_of_the_unicode_database_is_escaped() -> None:
    every = "".join(chr(c) for c in range(sys.maxunicode + 1))
    assert unsafe(every)  # the database knows some
    out = for_terminal(every, limit=None)
    assert not unsafe(out)


@pytest.mark.parametrize("text", HOSTILE + SAFE, ids=lambda t: repr(t[:24]))
def test_markdown_shows_the_text_literally(text: str) -> None:
    out = md_text(text, limit=None)
    assert md_unescape(out) == for_terminal(text, limit=None)
    assert not unsafe(out)


def test_markdown_cells_escape_pipes_code_html_and_newlines() -> None:
    assert md_text("a|b") == "a\\|b"
    assert md_text("`x`") == "\\`x\\`"
    assert md_text("<script>") == "&lt;script&gt;"
    assert md_text("a&lt;b") == "a&amp;lt;b"
    assert md_text("x\ny") == "x\\\\ny"  # the newline made visible, its backslash escaped
    assert md_text("max_attempts _em_") == "max_attempts \\_em\\_"
    assert md_text("explicit") == "explicit"


@pytest.mark.parametrize("text", HOSTILE, ids=lambda t: repr(t[:24]))
def test_html_shows_the_text_literally(text: str) -> None:
    out = html_text(text, limit=None)
    assert "<" not in out and ">" not in out and not unsafe(out)
    assert html.unescape(out) == for_terminal(text, limit=None)


def test_json_for_a_terminal_is_still_the_same_json() -> None:
    value = {"text": HOSTILE[:-2], "nested": [{"k\u202e": "\x9b\x7f\u2028"}], "n": 1}
    out = json_text(value)
    assert json.loads(out) == value
    assert not [c for c in unsafe(out) if c != "\n"]
    assert "\\u009b\\u007f\\u2028" in out and "\\u202e" in out
    assert json_text({"a": "é → ✓"}) == '{\n  "a": "é → ✓"\n}'  # the rest as it is


def test_a_signed_percentage_that_rounds_to_zero_is_never_minus_zero() -> None:
    assert [signed_pct(x) for x in (-0.001, 0.0, 0.05, -0.123)] == ["+0%", "+0%", "+5%", "-12%"]
    assert signed_pct(-0.0004, 1) == "+0.0%" and signed_pct(0.1234, 1) == "+12.3%"
