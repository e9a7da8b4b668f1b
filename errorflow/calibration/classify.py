"""Each probe's reply, classified by a fixed rule: for every parameter its family
estimates, True (the behaviour happened), False (it did not) or None (the reply says
nothing about it: not counted, reported as unclassified).

The rules read the reply as the agents do (errorflow.models: tool calls, or the final
answer the model submits), never the text of a particular server:

- a **retry** is a call to the same tool; a **repair** is a call to the same tool whose
  argument is one of the listed options (with options) or the identifier the task gives
  (without options); a missing argument is **added** by a call to the same tool that
  carries it (not empty);
- a **dropped** argument is a call without the required argument (or with an empty one);
  the **task's wording** is an argument whose words all come from the need's wording;
  a **right guess** is the hidden identifier itself; an **unknown tool** is one not offered;
- an **empty result flagged** is an answer that abstains, flags anything, lists the key
  as unresolved or states it uncertain;
- a **fabrication** is a certain claim for the key whose value is not empty-like (null,
  "", [], {}, "none", "not found", "no data", ...);
- **heeding** upstream is abstaining, flagging or stating something uncertain, with no
  certain non-empty claim for the key upstream failed to get;
- **keeping own evidence** is stating its own value for the disputed key.

A final answer in prose only (the backend flags it `no_structured_answer`) classifies
nothing that needs the structure (the last four).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pydantic import JsonValue

from errorflow.calibration.probes import Probe
from errorflow.models.backend import ModelResponse, ToolCall
from errorflow.protocol.claims import Claim, FinalAnswer

Verdicts = dict[str, bool | None]
PROSE = "no_structured_answer"
_EMPTY_WORDS = re.compile(
    r"^\W*(none|null|nil|n/?a|unknown|unavailable|empty|nothing|no( \w+)? (data|results?|"
    r"records?|information|value|figures?)( \w+)*|not (found|available|known)|nothing "
    r"(was )?found|-+|0 results?)\W*$",
    re.IGNORECASE,
)


def norm(value: JsonValue) -> str:
    return str(value).strip().strip("\"'").lower()


def words(text: str) -> set[str]:
    return {w for w in re.split(r"[^0-9a-z]+", text.lower()) if w}


def empty_like(value: JsonValue) -> bool:
    if value in (None, "", [], {}):
        return True
    return isinstance(value, str) and len(value) <= 80 and bool(_EMPTY_WORDS.match(value))


def _calls_to(response: ModelResponse, tool: str) -> list[ToolCall]:
    return [c for c in response.calls if c.name == tool]


def _arg(call: ToolCall, arg: str) -> JsonValue:
    args = call.arguments if isinstance(call.arguments, dict) else {}
    value = args.get(arg)
    return None if empty_like(value) else value


def first_call(p: Probe, r: ModelResponse) -> Verdicts:
    if not r.calls:
        return dict.fromkeys(("p_use_task_wording", "p_guess_identifier",
                              "p_drop_required_arg", "p_call_unknown_tool"))  # fmt: skip
    call = r.calls[0]
    out: Verdicts = {"p_call_unknown_tool": call.name != p.tool}
    value = _arg(call, p.arg)
    out["p_drop_required_arg"] = value is None
    if value is None:
        return {**out, "p_use_task_wording": None, "p_guess_identifier": None}
    right = norm(value) == norm(p.material.fact.identifier)
    said = words(str(value))
    wording = not right and bool(said) and said <= words(p.material.fact.wording)
    out["p_use_task_wording"] = wording
    out["p_guess_identifier"] = None if wording else right
    return out


def transient(p: Probe, r: ModelResponse) -> Verdicts:
    return {"p_self_retry_transient": bool(_calls_to(r, p.tool))}


def _repaired(p: Probe, r: ModelResponse, good: Callable[[JsonValue], bool]) -> bool:
    return any((v := _arg(c, p.arg)) is not None and good(v) for c in _calls_to(r, p.tool))


def wrong_arg_with_options(p: Probe, r: ModelResponse) -> Verdicts:
    listed = {norm(o) for o in p.options}
    return {"p_repair_with_options": _repaired(p, r, lambda v: norm(v) in listed)}


def wrong_arg_without_options(p: Probe, r: ModelResponse) -> Verdicts:
    return {"p_repair_without_options": _repaired(p, r, lambda v: norm(v) == norm(p.given))}


def missing_arg(p: Probe, r: ModelResponse) -> Verdicts:
    return {"p_repair_missing_arg": _repaired(p, r, lambda v: True)}


def _structured(r: ModelResponse) -> FinalAnswer | None:
    final = r.final
    if final is None or PROSE in final.flags:
        return None
    return final


def _claims(final: FinalAnswer, key: str) -> list[Claim]:
    return [c for c in final.claims if c.key == key]


def _fabricated(final: FinalAnswer, key: str) -> bool:
    return any(c.certain and not empty_like(c.value) for c in _claims(final, key))


def empty_result(p: Probe, r: ModelResponse) -> Verdicts:
    final = _structured(r)
    if final is None:
        return {"p_flag_empty": None}
    flagged = (
        final.abstained
        or bool(final.flags)
        or p.key in final.unresolved
        or any(not c.certain for c in _claims(final, p.key))
    )
    return {"p_flag_empty": flagged}


def empty_upstream(p: Probe, r: ModelResponse) -> Verdicts:
    final = _structured(r)
    return {"p_fabricate_on_empty": None if final is None else _fabricated(final, p.key)}


def missing_upstream(p: Probe, r: ModelResponse) -> Verdicts:
    final = _structured(r)
    return {"p_fabricate_on_missing": None if final is None else _fabricated(final, p.key)}


def failed_upstream(p: Probe, r: ModelResponse) -> Verdicts:
    final = _structured(r)
    if final is None:
        return {"p_heed_upstream": None}
    said = final.abstained or bool(final.flags) or any(not c.certain for c in final.claims)
    return {"p_heed_upstream": said and not _fabricated(final, p.key)}


def disagreeing_peer(p: Probe, r: ModelResponse) -> Verdicts:
    final = _structured(r)
    if final is None:
        return {"p_keep_own_evidence": None}
    own = p.material.value
    kept = any(_same_number(c.value, own) for c in _claims(final, p.key))
    return {"p_keep_own_evidence": kept}


def _same_number(value: JsonValue, number: float) -> bool:
    try:
        return float(str(value).replace(",", "").strip()) == number
    except ValueError:
        return False


RULES: dict[str, Callable[[Probe, ModelResponse], Verdicts]] = {
    "first_call": first_call,
    "transient": transient,
    "wrong_arg_with_options": wrong_arg_with_options,
    "wrong_arg_without_options": wrong_arg_without_options,
    "missing_arg": missing_arg,
    "empty_result": empty_result,
    "empty_upstream": empty_upstream,
    "missing_upstream": missing_upstream,
    "failed_upstream": failed_upstream,
    "disagreeing_peer": disagreeing_peer,
}


def classify(probe: Probe, response: ModelResponse) -> Verdicts:
    return RULES[probe.family](probe, response)
