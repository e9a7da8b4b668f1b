"""Profiles of the simulated model: named LLM tendencies, never outcomes.

A scenario names a profile (`model: {profile: small-local, params: {...}}`); the loader
checks the name and the overrides, and the simulated model (errorflow.models.simulated)
acts on the result. Each parameter describes what a model does when it meets a
situation (a transient error, a wrong argument with or without the valid options, an
empty result, an upstream agent that reports a failure). Scenario outcomes emerge from
these and the mechanism; nothing here names a scenario or a success rate.

`small-local` is calibrated to seed 000 (Ollama qwen2.5:7b-instruct, T=0.7, 20 runs a
cell); parameters without a measurement are marked as assumptions. `frontier` is an
explicitly labelled assumption of a stronger model, not a measurement.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

P = Field(ge=0.0, le=1.0)


class Tendencies(BaseModel):
    """What a simulated model tends to do at each decision point (what the agent does
    with a trial is its behaviour: errorflow.scenario.spec.behaviour)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    p_self_retry_transient: float = P
    """Retries a call itself after seeing a transient / timeout / rate-limit error."""
    p_use_task_wording: float = P
    """Passes the task's wording as an identifier it was not given (else guesses)."""
    p_guess_identifier: float = P
    """When not using the wording, guesses the real identifier right."""
    p_repair_with_options: float = P
    """Fixes a wrong argument when the error lists the valid options."""
    p_repair_without_options: float = P
    """Fixes a wrong argument when the error does not list the options."""
    p_repair_missing_arg: float = P
    """Adds a missing required argument when the error says which one is missing."""
    p_drop_required_arg: float = P
    """Leaves out a required argument in a call."""
    p_flag_empty: float = P
    """Marks an empty result as uncertain instead of stating 'nothing found'."""
    p_fabricate_on_empty: float = P
    """Writing from upstream material that is empty, invents content."""
    p_fabricate_on_missing: float = P
    """Writing without upstream material for a need, invents content."""
    p_heed_upstream: float = P
    """Downstream: acts on upstream errors / partial_failure / low confidence (flags,
    abstains) instead of writing confidently anyway."""
    p_call_unknown_tool: float = Field(default=0.0, ge=0.0, le=1.0)
    """Names a tool it was not given (a hallucinated variant of the right one) in its
    first call for a need; it repairs the name when the error lists the tools
    (p_repair_with_options). Default 0: no profile is calibrated on it."""
    p_keep_own_evidence: float = Field(default=0.8, ge=0.0, le=1.0)
    """In a discussion round, keeps a value it got from its own tools when a peer
    states another (else it goes with the majority). Assumption: no profile is
    calibrated on it (debate studies report models often yield to peers)."""
    tokens_per_char: float = Field(default=0.25, gt=0, le=4)
    base_prompt_tokens: int = Field(default=300, ge=0)
    output_tokens_per_call: int = Field(default=40, ge=0)


PROFILES: dict[str, Tendencies] = {
    "small-local": Tendencies(
        # seed 000 §2: transient + tell-model was 0/20: the model never retried itself.
        p_self_retry_transient=0.0,
        # seed 000 §3: the first name passed was the task wording '2024年营收' 20/20.
        p_use_task_wording=1.0,
        # seed 000 §3: a right first guess was 0/20.
        p_guess_identifier=0.0,
        # seed 000 §3: with the options listed 17/20 and 15/20 repaired → 32/40.
        p_repair_with_options=0.8,
        # seed 000 §3: raw ENOENT without options, 0/20 in both rounds.
        p_repair_without_options=0.0,
        # assumption: no measurement; set equal to the options case.
        p_repair_missing_arg=0.8,
        # seed 000 §3 round 2: 2/20 calls had no `name` at all → 2/40 over both rounds.
        p_drop_required_arg=0.05,
        # assumption (seed 003 narrative: "no papers found" is taken as a fact).
        p_flag_empty=0.0,
        # assumption (seed 003 narrative: the writer writes a confident report anyway).
        p_fabricate_on_empty=0.9,
        p_fabricate_on_missing=0.5,
        # assumption: a 7B model following "do not write when upstream reports errors".
        p_heed_upstream=0.85,
    ),
    "frontier": Tendencies(
        # ASSUMPTION, not a measurement: a stronger model, for comparison only.
        p_self_retry_transient=0.6,
        p_use_task_wording=0.5,
        p_guess_identifier=0.05,
        p_repair_with_options=0.97,
        p_repair_without_options=0.1,
        p_repair_missing_arg=0.98,
        p_drop_required_arg=0.005,
        p_flag_empty=0.5,
        p_fabricate_on_empty=0.3,
        p_fabricate_on_missing=0.2,
        p_heed_upstream=0.98,
    ),
}


def profile_with(profile: str, overrides: Mapping[str, object]) -> dict[str, object]:
    """The fields `tendencies` validates: the profile's, with `overrides` on top."""
    return {**PROFILES[profile].model_dump(), **overrides}


def tendencies(profile: str, overrides: Mapping[str, object] | None = None) -> Tendencies:
    if profile not in PROFILES:
        raise ValueError(f"unknown model profile {profile!r}; known: {', '.join(PROFILES)}")
    return Tendencies.model_validate(profile_with(profile, overrides or {}))
