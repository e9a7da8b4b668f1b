"""A discussion round, as the simulated model does it: revise an answer given peers'.

For every claim key a member or its peers state as certain and disagree on, a member
that looked the fact up itself states what its tools said with probability
`p_keep_own_evidence` (it trusts what it saw, even after yielding in an earlier round);
otherwise the value most of the answers state (its own previous one counts as one
voice) wins, ties broken by one seeded draw. Keys nobody states keep the member's own
open needs and flags. Pure: the caller gives the rng, so same seed, same revision.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

from pydantic import JsonValue

from errorflow.models.backend import UpstreamTurn
from errorflow.protocol.claims import Claim, FinalAnswer


def _said(answer: FinalAnswer) -> dict[str, Claim]:
    return {c.key: c for c in answer.claims if c.certain and c.value not in (None, [], {})}


def canonical(value: JsonValue) -> str:
    """A claim value as compared: lists as sets, numbers by value (5 == 5.0)."""
    if isinstance(value, list):
        return json.dumps(sorted(map(str, value)))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(float(value))
    return json.dumps(value, sort_keys=True, default=str)


def deliberate(
    previous: FinalAnswer,
    own_evidence: Mapping[str, JsonValue],
    peers: Sequence[UpstreamTurn],
    rng: random.Random,
    p_keep_own_evidence: float,
) -> FinalAnswer:
    mine = _said(previous)
    theirs = [_said(p.answer) for p in peers]
    keys = list(dict.fromkeys([*mine, *(k for t in theirs for k in t)]))
    claims: list[Claim] = []
    for key in keys:
        voices = [c for c in [mine.get(key), *(t.get(key) for t in theirs)] if c is not None]
        own = mine.get(key)
        disputed = len({canonical(c.value) for c in voices}) > 1
        if own is not None and not disputed:
            claims.append(own)
        elif key in own_evidence and rng.random() < p_keep_own_evidence:
            claims.append(Claim(key, own_evidence[key], True))  # what its tools said
        else:
            claims.append(_majority(voices, rng))
    # Uncertain claims of its own that nobody settled stay as they were (honest doubt).
    settled = {c.key for c in claims}
    claims += [c for c in previous.claims if c.key not in settled]
    unresolved = [k for k in previous.unresolved if k not in settled]
    return replace(
        previous,
        claims=claims,
        unresolved=unresolved,
        abstained=previous.abstained and not claims,
        text=f"Revised after discussion: {', '.join(c.key for c in claims) or 'nothing'}.",
    )


def _majority(voices: list[Claim], rng: random.Random) -> Claim:
    counts = Counter(canonical(c.value) for c in voices)
    top = max(counts.values())
    leaders = [v for v in dict.fromkeys(canonical(c.value) for c in voices) if counts[v] == top]
    pick = leaders[0] if len(leaders) == 1 else leaders[rng.randrange(len(leaders))]
    return next(c for c in voices if canonical(c.value) == pick)
