"""What a defence changed, told apart from the answers before and after it (pure).

The inspector returns the message it passes on; the challenger writes its own answer.
Comparing each with what the agent received says which claims were corrected (another
value now) and which were blocked (withheld: no longer stated), for the `defence` event.
"""

from __future__ import annotations

from collections.abc import Sequence

from errorflow.models.backend import UpstreamTurn
from errorflow.models.deliberation import canonical
from errorflow.protocol.claims import FinalAnswer


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
        elif canonical(later.value) != canonical(claim.value):
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
                and canonical(mine[claim.key]) != canonical(claim.value)
            ):
                out.setdefault(turn.sender, []).append(claim.key)
    return out
