"""Where each parameter of the built-in profiles came from (errorflow.scenario.provenance.origin).

`small-local` is fitted where the article's seed-000 table counts the behaviour (Ollama
qwen2.5:7b-instruct, T=0.7, 20 runs a cell): the bundled scenarios that reproduce that
table are therefore calibrated on the same data, not predictions of it. The rest of it,
and all of `frontier`, are assumptions, each with its reason.
"""

from __future__ import annotations

from errorflow.scenario.provenance.origin import Fitted, Origin
from errorflow.scenario.spec.profiles import Tendencies

SEED_000_MODEL = "qwen2.5:7b-instruct (Ollama, T=0.7)"

#: The parameters that only price a simulated call, and why they are what they are.
TOKEN_FIELDS = ("tokens_per_char", "base_prompt_tokens", "output_tokens_per_call")
TOKEN_REASON = "the simulated model's token estimate (its usage, not a behaviour)"


def _fitted(source: str, successes: int, trials: int, note: str = "") -> Origin:
    return Origin(fitted=Fitted(source=source, model=SEED_000_MODEL, successes=successes,
                                trials=trials, note=note))  # fmt: skip


def _assumed(reason: str) -> Origin:
    return Origin(assumed=reason)


_SMALL_LOCAL: dict[str, Origin] = {
    "p_self_retry_transient": _fitted(
        "seed 000 §2 (transient error, tell-model: the model never retried itself)", 0, 20
    ),
    "p_use_task_wording": _fitted(
        "seed 000 §3 (the first name passed was the task wording)", 20, 20
    ),
    "p_guess_identifier": _fitted("seed 000 §3 (a right first guess)", 0, 20),
    "p_repair_with_options": _fitted(
        "seed 000 §3 (repaired with the valid options listed, both rounds: 17/20 + 15/20)", 32, 40
    ),
    "p_repair_without_options": _fitted(
        "seed 000 §3 (raw ENOENT without options, both rounds)",
        0,
        40,
        note="there the right name was nowhere in the conversation; the simulated model "
        "uses this parameter only where it knows the right value (the task states it)",
    ),
    "p_repair_missing_arg": _assumed("no measurement; set equal to the options case"),
    "p_drop_required_arg": _fitted(
        "seed 000 §3 round 2 (calls with no `name` at all: 2/20, none in round 1)", 2, 40
    ),
    "p_flag_empty": _assumed("seed 003's narrative: 'no papers found' is taken as a fact"),
    "p_fabricate_on_empty": _assumed(
        "seed 003's narrative: the writer writes a confident report anyway"
    ),
    "p_fabricate_on_missing": _assumed(
        "no measurement; half of the empty case's rate (nothing at all to write around)"
    ),
    "p_heed_upstream": _assumed(
        "no measurement; a 7B model following 'do not write when upstream reports errors'"
    ),
}

#: Parameters no built-in profile is calibrated on (their defaults).
_DEFAULTS: dict[str, Origin] = {
    "p_call_unknown_tool": _assumed("no profile is calibrated on it; 0 keeps runs comparable"),
    "p_keep_own_evidence": _assumed(
        "no measurement; debate studies report models often yield to peers"
    ),
    **{f: _assumed(TOKEN_REASON) for f in TOKEN_FIELDS},
}

_FRONTIER = "a stronger model, for comparison only: not a measurement"

BUILTIN_ORIGINS: dict[str, dict[str, Origin]] = {
    "small-local": {**_SMALL_LOCAL, **_DEFAULTS},
    "frontier": {
        **{f: _assumed(_FRONTIER) for f in Tendencies.model_fields},
        **_DEFAULTS,
    },
}


def builtin_origins(profile: str) -> dict[str, Origin]:
    """Every parameter of built-in `profile` with its origin, in field order."""
    origins = BUILTIN_ORIGINS[profile]
    return {f: origins[f] for f in Tendencies.model_fields}
