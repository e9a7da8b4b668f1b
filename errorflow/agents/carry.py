"""Passing on what an agent relied on: upstream findings travel down a chain.

A gathering or routing agent answers for its own needs; what it received from upstream
agents (their claims, open needs and flags) goes on with its result, each claim with
its provenance (`source`, the agent that found it), so a chain of any length reaches
the writer with every finding, and a wrong finding travels as far as it is trusted.
Synthesising and checking agents write their own complete answer and carry nothing.
Pure: the agent applies it to the final answer before the result is published.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from errorflow.models.backend import UpstreamTurn
from errorflow.protocol.claims import Claim, FinalAnswer


def _covers(keys: set[str], key: str) -> bool:
    """`key` (or the batch it is an item of, or an item of it) is already answered."""
    return key in keys or key.split(".", 1)[0] in keys or any(k.startswith(key + ".") for k in keys)


def carry_forward(final: FinalAnswer, upstream: Sequence[UpstreamTurn]) -> FinalAnswer:
    """`final` with every upstream finding it does not answer itself added: claims
    (provenance kept, or set to the sender), open needs and flags."""
    if not upstream:
        return final
    own = {c.key for c in final.claims} | set(final.unresolved)
    claims = list(final.claims)
    unresolved = list(final.unresolved)
    flags = list(final.flags)
    for turn in upstream:
        for claim in turn.answer.claims:
            if not _covers(own, claim.key) and all(c.key != claim.key for c in claims):
                claims.append(_sourced(claim, turn.sender))
        flags.extend(f for f in turn.answer.flags if f not in flags)
    # A need one input left open and another answered is answered, whichever came first.
    known = {c.key for c in claims}
    for turn in upstream:
        for key in turn.answer.unresolved:
            if not _covers(own, key) and key not in unresolved and not _covers(known, key):
                unresolved.append(key)
    return replace(final, claims=claims, unresolved=unresolved, flags=flags)


def _sourced(claim: Claim, sender: str) -> Claim:
    return claim if claim.source is not None else replace(claim, source=sender)
