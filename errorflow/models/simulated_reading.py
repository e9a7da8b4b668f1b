"""How the simulated model reads what it is shown: the task and upstream turns, the
state of each need's calls, error observations (structured fields first, then the
words of a raw message), claims against what a source said, and the text it counts
as its prompt; and what a made-up value looks like. Pure functions: the model's
decisions stay in errorflow.models.simulated, which hands `invent` its random stream.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from pydantic import JsonValue

from errorflow.models.backend import (
    AssistantTurn,
    Inspection,
    NeedView,
    ObservationTurn,
    TaskTurn,
    ToolCall,
    Turn,
    UpstreamTurn,
)
from errorflow.protocol.claims import Claim, FinalAnswer
from errorflow.protocol.envelope import JsonObject

_EPOCH = dt.date(1990, 1, 1)

# Words a model associates with "try again later" and with "wrong argument" when an
# error arrives as raw text. This is the model reading prose, not our classifier.
_TRANSIENT_WORDS = ("timedout", "timeout", "503", "502", "504", "429", "unavailable", "too many")
_MISSING_WORDS = ("missing", "undefined", "required")

#: A model-facing observation, as the model reads it.
Obs = Mapping[str, JsonValue]


@dataclass
class NeedState:
    need: NeedView
    calls: list[tuple[ToolCall, ObservationTurn | None]]


def task_turn(turns: list[Turn]) -> TaskTurn | None:
    return next((t for t in turns if isinstance(t, TaskTurn)), None)


def upstream_turns(turns: list[Turn]) -> list[UpstreamTurn]:
    return [t for t in turns if isinstance(t, UpstreamTurn)]


def troubled(upstream: list[UpstreamTurn]) -> bool:
    """Whether any upstream message shows a failure a careful writer would heed."""
    return any(
        u.status != "ok" or u.errors or u.confidence < 0.5 or u.answer.abstained for u in upstream
    )


def substantial(claim: Claim) -> bool:
    return claim.value not in (None, [], {})


def claim_items(answer: FinalAnswer, need: NeedView, value: JsonObject, obs: Obs) -> None:
    """A batch answers per item: one claim each, failed items left open."""
    for item in sorted(value):
        answer.claims.append(Claim(f"{need.id}.{item}", value[item], True))
    for failed in json_list(obs.get("failed_items")):
        answer.unresolved.append(f"{need.id}.{failed}")


def check_claim(
    answer: FinalAnswer, claim: Claim, needs: list[NeedView], observed: dict[str, Obs | None]
) -> None:
    """A reviewer's verdict on one claim of the report, against what the tools said."""
    need = next((n for n in needs if key_of(claim.key, n)), None)
    obs = observed.get(need.id) if need is not None else None
    if need is None or obs is None:
        answer.claims.append(Claim(claim.key, claim.value, False))
        _flag(answer, f"{claim.key}: could not be verified")
        return
    source = obs.get("result")
    if is_batch(need) and isinstance(source, dict):
        source = source.get(claim.key.split(".", 1)[1]) if "." in claim.key else source
    if same(claim.value, source):
        answer.claims.append(claim)
    else:
        answer.revise.append(claim.key)
        _flag(answer, f"{claim.key}: contradicted by the source; sent back")


def _flag(answer: FinalAnswer, flag: str) -> None:
    """A reviewer's flag, once: a claim sent back again carries the last review's."""
    if flag not in answer.flags:
        answer.flags.append(flag)


def source_value(key: str, need: NeedView, obs: Obs | None) -> JsonValue:
    source = obs.get("result") if obs is not None else None
    if is_batch(need) and isinstance(source, dict):
        source = source.get(key.split(".", 1)[1]) if "." in key else source
    return source


def agrees(
    key: str, need: NeedView, message: UpstreamTurn, observed: dict[str, Obs | None]
) -> bool:
    """Whether the claim checks out (a check whose tool failed proves nothing)."""
    obs = observed.get(need.id)
    if obs is None:
        return True
    claim = next(c for c in message.answer.claims if c.key == key)
    return same(claim.value, source_value(key, need, obs))


def lineage(message: UpstreamTurn, key: str) -> str:
    """Where a claim comes from: the agent that first stated it."""
    claim = next(c for c in message.answer.claims if c.key == key)
    return claim.source or message.sender


def inspected(
    message: UpstreamTurn,
    need_of: dict[str, NeedView],
    observed: dict[str, Obs | None],
    checked: set[str],
    brief: Inspection,
) -> FinalAnswer:
    """The message as the inspector passes it on: contradicted claims corrected from
    the tools (or blocked), quarantined ones it could not re-derive withheld."""
    answer = replace(message.answer, claims=[], flags=list(message.answer.flags))
    answer.unresolved = list(message.answer.unresolved)
    for claim in message.answer.claims:
        if claim.key not in checked:
            answer.claims.append(claim)
            continue
        need = need_of[claim.key]
        obs = observed.get(need.id)
        if obs is None:
            answer.claims.append(claim)
            continue
        truth = source_value(claim.key, need, obs)
        if same(claim.value, truth):
            answer.claims.append(claim)
        elif brief.on_wrong == "correct" and truth not in (None, [], {}):
            answer.claims.append(Claim(claim.key, truth, True))
            answer.flags.append(f"{claim.key}: corrected by inspection")
        else:
            answer.unresolved.append(claim.key)
            answer.flags.append(f"{claim.key}: blocked by inspection")
    answer.abstained = message.answer.abstained and not answer.claims
    return answer


def perceive(obs: Obs) -> str:
    """How a model reads an error observation: structured fields first, then words."""
    code = obs.get("code")
    if code in ("transient", "timeout", "rate_limit"):
        return "transient"
    if code == "invalid_args":
        return "missing" if obs.get("received") is None and obs.get("field") else "wrong_arg"
    if code == "not_found" and obs.get("options"):
        return "wrong_arg"  # no such key, and here are the ones there are
    if code == "unknown_tool":
        return "wrong_tool"
    if code is not None:
        return "other"
    text = str(obs.get("error", "")).lower().replace(" ", "")
    if any(w in text for w in _TRANSIENT_WORDS):
        return "transient"
    if "enoent" in text or "nosuch" in text or "notvalid" in text or "typeerror" in text:
        # A raw error does not tell a missing argument from a wrong one (seed 000 §3).
        return "wrong_arg"
    if any(w in text for w in _MISSING_WORDS):
        return "wrong_arg"
    return "other"


def resolved(st: NeedState) -> Obs | None:
    for _, obs in st.calls:
        if obs is not None and obs.content.get("ok"):
            return obs.content
        if obs is not None and obs.content.get("code") == "partial_success":
            return obs.content
    return None


def served_by(need: NeedView, tools: Collection[str]) -> NeedView | None:
    """The need as an agent holding `tools` fetches it: with its own tool, else with
    the first second source it holds (so a claim is checked against another source
    than the one that produced it); None when it holds neither."""
    if need.tool in tools:
        return need
    source = next((t for t in need.sources if t in tools), None)
    return replace(need, tool=source) if source is not None else None


def key_of(key: str, need: NeedView) -> bool:
    return key == need.id or key.startswith(need.id + ".")


def same(a: JsonValue, b: JsonValue) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return sorted(map(str, a)) == sorted(map(str, b))
    return bool(a == b)


def is_batch(need: NeedView) -> bool:
    return isinstance(need.identifier if need.identifier is not None else need.meant, list)


def expected_keys(needs: list[NeedView]) -> list[tuple[str, NeedView]]:
    """The claim keys a complete report has: one per need, one per item of a batch."""
    keys: list[tuple[str, NeedView]] = []
    for need in needs:
        items = need.identifier if need.identifier is not None else need.meant
        if isinstance(items, list):
            keys += [(f"{need.id}.{item}", need) for item in items]
        else:
            keys.append((need.id, need))
    return keys


def json_list(value: JsonValue) -> list[JsonValue]:
    return value if isinstance(value, list) else []


def strings(value: JsonValue) -> list[str]:
    """The strings of a JSON list (an observation's `options`), else none."""
    return [v for v in json_list(value) if isinstance(v, str)]


def json_arg(value: JsonValue) -> JsonValue:
    """An identifier as a call argument (a JSON value: the list is copied as one)."""
    return list(value) if isinstance(value, list) else value


def best_option(need: NeedView, options: list[str]) -> str | None:
    """Repairing from a list: the option the wording points at, if the list has it."""
    hidden = hidden_identifier(need)
    if isinstance(hidden, str) and hidden in options:
        return hidden
    return options[0] if options else None


def hidden_identifier(need: NeedView) -> JsonValue:
    return need.meant if need.meant is not None else need.identifier


# What `json.dumps` with these options makes anew for every call.
_UNESCAPED = json.JSONEncoder(ensure_ascii=False, default=str)
_ESCAPED = json.JSONEncoder(default=str)


def turn_text(turn: Turn) -> str:
    if isinstance(turn, TaskTurn):
        return turn.prompt + " ".join(n.wording for n in turn.needs)
    if isinstance(turn, ObservationTurn):
        return _UNESCAPED.encode(turn.content)
    if isinstance(turn, UpstreamTurn):
        return _ESCAPED.encode({"c": [claim_text(c) for c in turn.answer.claims], "e": turn.errors})
    if isinstance(turn, AssistantTurn):
        return _ESCAPED.encode([c.arguments for c in turn.calls])
    return ""


class TurnLengths:
    """The length of each turn's text, measured once in a conversation (every model call
    reads all the turns before it again): called with a turn, its `len(turn_text)`."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[Turn, int]] = {}  # by id: the turn, its length

    def __call__(self, turn: Turn) -> int:
        known = self._known.get(id(turn))
        if known is None or known[0] is not turn:
            known = self._known[id(turn)] = (turn, len(turn_text(turn)))
        return known[1]


def claim_text(claim: Claim) -> dict[str, object]:
    """A claim as the model reads it (its provenance only when it was carried on)."""
    text: dict[str, object] = {"key": claim.key, "value": claim.value, "certain": claim.certain}
    if claim.source is not None:
        text["source"] = claim.source
    return text


def need_states(task: TaskTurn, turns: list[Turn]) -> list[NeedState]:
    """Each need's calls so far, with the observation each got (None: none yet)."""
    by_id = {n.id: NeedState(n, []) for n in task.needs}
    pending: dict[str, tuple[str, int]] = {}
    for turn in turns:
        if isinstance(turn, AssistantTurn):
            for call in turn.calls:
                need_id = call.id.split("#", 1)[0]
                if need_id in by_id:
                    by_id[need_id].calls.append((call, None))
                    pending[call.id] = (need_id, len(by_id[need_id].calls) - 1)
        elif isinstance(turn, ObservationTurn) and turn.call_id in pending:
            need_id, index = pending.pop(turn.call_id)
            call, _ = by_id[need_id].calls[index]
            by_id[need_id].calls[index] = (call, turn)
    return list(by_id.values())


def invent(need: NeedView, rng: random.Random) -> JsonValue:
    """A made-up answer of the shape the need asks for (one draw, whatever the shape)."""
    if is_batch(need):
        return f"fabricated text {rng.randrange(10**6)}"
    if need.tool and "paper" in need.tool:
        return [f"fabricated-{rng.randrange(10**6)}" for _ in range(3)]
    if need.shape == "string":
        return f"fabricated-{rng.randrange(10**6)}"
    if need.shape == "date":
        day = _EPOCH + dt.timedelta(days=rng.randrange(20_000))
        return day.isoformat()
    if need.shape == "boolean":
        return rng.random() < 0.5
    if need.shape == "list":
        return [f"fabricated-{rng.randrange(10**6)}"]
    if need.shape == "object":
        return {"value": f"fabricated-{rng.randrange(10**6)}"}
    return round(rng.uniform(1, 10**6), 2)
