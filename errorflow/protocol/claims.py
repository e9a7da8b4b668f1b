"""Claims and answers, and how they travel: FinalAnswer ↔ the `answer` object of a result payload.

Writing is exact; reading is defensive, since the object comes from another agent
over the bus: anything that is not an answer reads as an abstention, and claims
without a string key are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import JsonValue

from errorflow.protocol.envelope import JsonObject


@dataclass(frozen=True)
class Claim:
    key: str
    value: JsonValue
    certain: bool = True
    #: The agent that found it, when the claim was carried on from upstream.
    source: str | None = None


@dataclass
class FinalAnswer:
    claims: list[Claim] = field(default_factory=list)
    abstained: bool = False
    flags: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    text: str = ""
    #: Reviewers: claim keys found wrong, sent back to the author for revision.
    revise: list[str] = field(default_factory=list)


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
