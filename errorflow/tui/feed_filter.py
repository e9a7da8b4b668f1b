"""The feed's filter: which messages to list, from words the user types (pure).

`contaminated writer t3` lists the contaminated messages that the writer sent or got
in trial 3. Each word is a label (`clean`, `contained`, `contaminated`, or a prefix
such as `cont…` only one of them has), a trial (`t3`, `#3` or `3`), or else part of an
agent's name; words of one kind widen the filter (`t3 t4`: either trial), words of
different kinds narrow it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from errorflow.protocol.envelope import Kind
from errorflow.scoring.score import Label
from errorflow.tui.state import FeedItem

TRIAL = re.compile(r"^(?:t|#)?(\d+)$")


@dataclass(frozen=True)
class FeedFilter:
    labels: frozenset[Label] = frozenset()
    trials: frozenset[int] = frozenset()
    agents: tuple[str, ...] = ()
    text: str = ""

    @property
    def active(self) -> bool:
        return bool(self.labels or self.trials or self.agents)

    @property
    def by_label(self) -> bool:
        """Whether a label that arrives later can move a message in or out."""
        return bool(self.labels)

    def matches(self, item: FeedItem) -> bool:
        env = item.env
        if self.trials and env.trial not in self.trials:
            return False
        if self.agents and not any(a in env.sender.lower() or a in env.recipient.lower()
                                   for a in self.agents):  # fmt: skip
            return False
        if self.labels:
            return env.kind is Kind.RESULT and item.label in self.labels
        return True


def parse_filter(text: str) -> FeedFilter:
    labels: set[Label] = set()
    trials: set[int] = set()
    agents: list[str] = []
    for word in text.lower().split():
        trial = TRIAL.match(word)
        named = [lb for lb in Label if lb.value.startswith(word)]
        if trial:
            trials.add(int(trial.group(1)))
        elif len(named) == 1 and len(word) >= 3:
            labels.add(named[0])
        else:
            agents.append(word)
    return FeedFilter(frozenset(labels), frozenset(trials), tuple(agents), text.strip())
