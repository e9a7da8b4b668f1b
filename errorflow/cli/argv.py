"""Every word of a command line, checked before any command sees it: UTF-8 text, and no
larger than a scenario file.

Python hands a word that is not UTF-8 over with its bad bytes as lone surrogates
(`os.fsdecode`): such text cannot be written to the store, the bus or a report, and
would fail wherever it first is. A word is at most 128 KiB on Linux, but `main(argv)`
can be given anything; no value needs more than a scenario file may hold.
"""

from __future__ import annotations

from collections.abc import Sequence

from errorflow.cli.errors import UsageError
from errorflow.core.errors import clipped

#: The largest word: what a scenario file may hold (a `--set` value is a piece of one;
#: scenario_file.MAX_SCENARIO_BYTES, not imported: `errorflow --help` need not load YAML).
MAX_WORD_BYTES = 1_000_000


def check_words(words: Sequence[str]) -> None:
    """Refuse a word that is not UTF-8 text or is larger than `MAX_WORD_BYTES`."""
    for number, word in enumerate(words, start=1):
        try:
            size = len(word.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise UsageError(
                f"expected UTF-8 text, found {_bad(word[exc.start])} at character "
                f"{exc.start + 1} (the terminal's or the file's encoding is not UTF-8?)",
                where=_named(number, word),
            ) from None
        if size > MAX_WORD_BYTES:
            raise UsageError(
                f"expected at most {MAX_WORD_BYTES:,} bytes, found {size:,}",
                where=_named(number, word),
            )


def _bad(char: str) -> str:
    """A lone surrogate as what it stands for: the byte that was not UTF-8."""
    try:
        return f"the byte 0x{char.encode('utf-8', 'surrogateescape')[0]:02x}"
    except UnicodeEncodeError:  # not from a byte: given so by a caller
        return f"U+{ord(char):04X}, half of a surrogate pair"


def _named(number: int, word: str) -> str:
    """`argument 4 (--set name=\\xff)`: the word with its bad bytes escaped, shortened."""
    try:
        raw = word.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = word.encode("utf-8", "backslashreplace")
    return f"argument {number} ({clipped(raw.decode('utf-8', 'backslashreplace'))})"
