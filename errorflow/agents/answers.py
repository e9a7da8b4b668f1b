"""Answers on the wire: FinalAnswer ↔ the `answer` object of a result payload.

Writing is exact; reading is defensive, since the object comes from another agent
over the bus: anything that is not an answer reads as an abstention, and claims
without a string key are dropped.
"""

from __future__ import annotations

from pydantic import JsonValue

from errorflow.agents.model import Claim, FinalAnswer
from errorflow.bus.envelope import JsonObject


def claim_to_wire(claim: Claim) -> JsonObject:
    wire: JsonObject = {"key": claim.key, "value": claim.value, "certain": claim.certain}
    if claim.source is not None:
        wire["source"] = claim.source
    return wire


def answer_to_wire(answer: FinalAnswer) -> JsonObject:
    claims: list[JsonValue] = [claim_to_wire(c) for c in answer.claims]
    flags: list[JsonValue] = list(answer.flags)
    unresolved: list[JsonValue] = list(answer.unresolved)
    revise: list[JsonValue] = list(answer.revise)
    return {
        "claims": claims,
        "abstained": answer.abstained,
        "flags": flags,
        "unresolved": unresolved,
        "text": answer.text,
        "revise": revise,
    }


def answer_from_wire(data: object) -> FinalAnswer:
    if not isinstance(data, dict):
        return FinalAnswer(abstained=True, flags=["malformed answer"])
    claims = []
    for c in data.get("claims") or []:
        if isinstance(c, dict) and isinstance(c.get("key"), str):
            source = c.get("source")
            claims.append(
                Claim(
                    c["key"],
                    c.get("value"),
                    bool(c.get("certain", True)),
                    source if isinstance(source, str) else None,
                )
            )
    return FinalAnswer(
        claims=claims,
        abstained=bool(data.get("abstained", False)),
        flags=[str(f) for f in data.get("flags") or []],
        unresolved=[str(u) for u in data.get("unresolved") or []],
        text=str(data.get("text", "")),
        revise=[str(k) for k in data.get("revise") or []],
    )
