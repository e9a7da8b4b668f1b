"""Strings from outside, made safe for where they are shown: a terminal, Markdown, HTML.

Anything another process, a scenario file or a command line can set (agent and tool
names from the bus, error texts, sweep values, run ids, paths) may carry terminal
control sequences: `ESC ] 0 ; title BEL` retitles the terminal, `ESC [ ? 1049 l` leaves
the TUI's alternate screen, U+202E turns the rest of a line around. Every display edge
passes such strings through here, after which no control character is left.

Control characters are made visible, not dropped (`\\x1b]0;title\\x07`): the user sees
that something odd arrived, and what. A sequence whose introducer (ESC, or the 8-bit
CSI `\\x9b`) is escaped is plain text, so escaping each character neutralises every
sequence (CSI, OSC, DCS, APC) without parsing any.

Unsafe: C0 and C1 controls and DEL (Unicode category Cc), format characters (Cf: bidi
embeddings, overrides and isolates, zero-width characters, the BOM, tag characters),
lone surrogates (Cs: a terminal cannot even be sent one), the line and paragraph
separators (Zl, Zp) and the noncharacters U+FDD0-U+FDEF, U+FFFE and U+FFFF. The ranges
below are Unicode 14's (Python 3.11's `unicodedata`, checked by tests/test_display.py)
and the format controls Unicode 15 added after them.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufdd0-\ufdef"
    "\ufeff\ufff9-\ufffb\ufffe\uffff\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)
#: Kept as they are where a text may span lines (an error message, a JSON document).
_LAYOUT = frozenset("\n\t")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

#: What a one-line text is cut to by default: no agent name or label needs more, and a
#: megabyte "tool name" must not cost a megabyte per frame.
LIMIT = 1000

#: Escaped with a backslash in Markdown: what makes emphasis, code, links, strike-through,
#: table cells (and the backslash itself, so an escape cannot be undone).
_MD_PUNCT = re.compile(r"[\\`*\[\]|~]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
#: HTML in Markdown is raw HTML: these go as entities (`&` too, or `&lt;` would be `<`).
_MD_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_MD_HTML = re.compile("[&<>]")


def escape_char(ch: str) -> str:
    """The visible form of one character: `\\n`, `\\x1b`, `\\u202e`, `\\U000e0041`."""
    if ch in _NAMED:
        return _NAMED[ch]
    cp = ord(ch)
    if cp < 0x100:
        return f"\\x{cp:02x}"
    return f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def _visible(match: re.Match[str]) -> str:
    return escape_char(match.group())


def _visible_keeping_layout(match: re.Match[str]) -> str:
    ch = match.group()
    return ch if ch in _LAYOUT else escape_char(ch)


def for_terminal(text: str, *, multiline: bool = False, limit: int | None = LIMIT) -> str:
    """`text` with every control, format and separator character made visible, and at
    most `limit` characters long (None: whole; a cut text ends with `… (N chars)`, N its
    length). One-line (the default): newlines and tabs made visible too, so a table cell
    stays one cell; `multiline` keeps newlines and tabs.

    Idempotent: what it returns has nothing left to escape and is not too long."""
    visible = _visible_keeping_layout if multiline else _visible
    whole = limit is None or len(text) <= limit
    # Escaping never shortens a text: the first `limit` characters are all that can show.
    shown = _UNSAFE.sub(visible, text if whole else text[:limit])
    if limit is None or (whole and len(shown) <= limit):
        return shown
    note = f"… ({len(text)} chars)"
    return shown[: max(0, limit - len(note))] + note


def _md_entity(match: re.Match[str]) -> str:
    return _MD_ENTITIES[match.group()]


def md_text(text: str, *, limit: int | None = LIMIT) -> str:
    """`text` as Markdown that shows it literally: on one line (newlines made visible),
    safe in a table cell (`|` escaped), with no emphasis, code span, link or raw HTML.
    An underscore inside a word stays as it is: it never starts emphasis."""
    text = for_terminal(text, limit=limit)
    text = _MD_PUNCT.sub(lambda m: "\\" + m.group(), text)
    return _MD_HTML.sub(_md_entity, text)


def html_text(text: str, *, limit: int | None = LIMIT) -> str:
    """`text` as HTML text that shows it literally, control characters made visible."""
    return html.escape(for_terminal(text, limit=limit))


def _json_escape(match: re.Match[str]) -> str:
    ch = match.group()
    return ch if ch == "\n" else json.dumps(ch)[1:-1]


def json_text(value: Any) -> str:
    """`value` as indented JSON for a terminal, still valid JSON: JSON escapes C0
    controls itself, and here every other character a terminal must not get (DEL, C1,
    bidi overrides, ...) becomes a `\\u` escape too. Only the layout's newlines stay."""
    return _UNSAFE.sub(_json_escape, json.dumps(value, indent=2, ensure_ascii=False))


def signed_pct(fraction: float, digits: int = 0) -> str:
    """`+5%`, `-12%`, `+0%`: a difference as a signed percentage; one that rounds to
    zero is `+0%`, never `-0%`."""
    value = round(fraction * 100, digits) + 0.0  # + 0.0: -0.0 becomes 0.0
    return f"{value:+.{digits}f}%"
