"""What a defence changed, told apart from the answers before and after it (pure).

The inspector returns the message it passes on; the challenger writes its own answer.
Comparing each with what the agent received says which claims were corrected (another
value now) and which were blocked (withheld: no longer stated), for the `defence` event.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import JsonValue

from errorflow.agents.model import FinalAnswer, UpstreamTurn


def _canon(value: JsonValue) -> str:
    if isinstance(value, list):
        return json.dumps(sorted(map(str, value)))
    return json.dumps(value, sort_keys=True, default=str)


def changes(before: FinalAnswer, after: FinalAnswer) -> tuple[list[str], list[str]]:
    """(corrected, blocked): claim keys stated with another value, and no longer stated."""
    now = {c.key: c for c in after.claims}
    corrected, blocked = [], []
    for claim in before.claims:
        if not claim.certain:
            continue
        later = now.get(claim.key)
        if later is None:
            blocked.append(claim.key)
        elif _canon(later.value) != _canon(claim.value):
            corrected.append(claim.key)
    return corrected, blocked


def overruled(final: FinalAnswer, upstream: Sequence[UpstreamTurn]) -> dict[str, list[str]]:
    """By sender: the claims a challenger received and states otherwise."""
    mine = {c.key: c.value for c in final.claims if c.certain}
    out: dict[str, list[str]] = {}
    for turn in upstream:
        for claim in turn.answer.claims:
            if (
                claim.certain
                and claim.key in mine
                and _canon(mine[claim.key]) != _canon(claim.value)
            ):
                out.setdefault(turn.sender, []).append(claim.key)
    return out
