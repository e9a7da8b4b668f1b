"""Answers on the wire: FinalAnswer ↔ the `answer` object of a result payload."""

from __future__ import annotations

from typing import Any

from errorflow.agents.model import Claim, FinalAnswer


def answer_to_wire(answer: FinalAnswer) -> dict[str, Any]:
    return {
        "claims": [{"key": c.key, "value": c.value, "certain": c.certain} for c in answer.claims],
        "abstained": answer.abstained,
        "flags": list(answer.flags),
        "unresolved": list(answer.unresolved),
        "text": answer.text,
        "revise": list(answer.revise),
    }


def answer_from_wire(data: Any) -> FinalAnswer:
    if not isinstance(data, dict):
        return FinalAnswer(abstained=True, flags=["malformed answer"])
    claims = []
    for c in data.get("claims") or []:
        if isinstance(c, dict) and isinstance(c.get("key"), str):
            claims.append(Claim(c["key"], c.get("value"), bool(c.get("certain", True))))
    return FinalAnswer(
        claims=claims,
        abstained=bool(data.get("abstained", False)),
        flags=[str(f) for f in data.get("flags") or []],
        unresolved=[str(u) for u in data.get("unresolved") or []],
        text=str(data.get("text", "")),
        revise=[str(k) for k in data.get("revise") or []],
    )
