"""ShortMemo: a short text's answer is computed once; a long one's every time and never
kept; at most `kept` answers, the least recently used dropped first."""

from __future__ import annotations

from errorflow.core.short_memo import ShortMemo


def test_short_texts_are_answered_once_long_ones_every_time() -> None:
    asked: list[str] = []

    def length(text: str) -> int:
        asked.append(text)
        return len(text)

    memo = ShortMemo(length, longest=4, kept=2)
    ask = memo.ask
    assert [ask("ab"), ask("ab"), ask("abcd"), ask("abcd")] == [2, 2, 4, 4]
    assert asked == ["ab", "abcd"] and memo.size() == 2
    assert [ask("abcde"), ask("abcde")] == [5, 5]
    assert asked[2:] == ["abcde", "abcde"] and memo.size() == 2
    ask("x")  # a third short text: the least recently used ("ab") is dropped
    ask("abcd")
    ask("ab")
    assert asked[4:] == ["x", "ab"] and memo.size() == 2
    memo.clear()
    assert memo.size() == 0
