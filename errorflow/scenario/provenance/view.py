"""The profile an agent's simulated model acts on, and where each parameter came from:
a built-in profile (errorflow.scenario.spec.profiles, origins in builtin) or a
profile file the scenario names (profile_file), with the scenario's `params` on top."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from errorflow.scenario.provenance.builtin import builtin_origins
from errorflow.scenario.provenance.origin import Origin
from errorflow.scenario.provenance.profile_file import InlinedProfile, is_profile_path
from errorflow.scenario.spec.profiles import PROFILES, Tendencies

#: The origin of a value a scenario's `params` sets.
SET_IN_SCENARIO = Origin(assumed="set in the scenario (model.params)")


@dataclass(frozen=True)
class ProfileView:
    """A profile as one agent uses it."""

    name: str  # the built-in's name, or the file's `name`
    source: str  # "built-in", or the file as the scenario names it
    base: Tendencies  # the profile's own values, before `params`
    values: dict[str, object]  # what the model acts on: `params` on top
    origins: dict[str, Origin]  # every parameter, `params` overrides included
    overridden: tuple[str, ...]  # the parameters `params` sets

    @property
    def label(self) -> str:
        where = "built-in" if self.source == "built-in" else self.source
        more = f", {len(self.overridden)} set in the scenario" if self.overridden else ""
        return f"{self.name} ({where}{more})"

    def counts(self) -> dict[str, int]:
        """How many parameters are measured, fitted, assumed."""
        out = {"measured": 0, "fitted": 0, "assumed": 0}
        for origin in self.origins.values():
            out[origin.kind] += 1
        return out


def base_profile(profile: str, inlined: InlinedProfile | None) -> tuple[str, str, Tendencies]:
    """(name, source, values) of the profile `profile` names; ValueError when none."""
    if is_profile_path(profile):
        if inlined is None or inlined.path != profile:
            raise ValueError(f"profile file {profile!r} was not read (load the scenario file)")
        return inlined.profile.name, profile, inlined.profile.tendencies()
    if profile not in PROFILES:
        raise ValueError(f"unknown model profile {profile!r}; known: {', '.join(PROFILES)}")
    return profile, "built-in", PROFILES[profile]


def profile_view(
    profile: str, params: Mapping[str, object], inlined: InlinedProfile | None
) -> ProfileView:
    name, source, base = base_profile(profile, inlined)
    own = inlined.profile.origins() if source != "built-in" and inlined else builtin_origins(name)
    overridden = tuple(p for p in Tendencies.model_fields if p in params)
    origins = {f: SET_IN_SCENARIO if f in params else own[f] for f in Tendencies.model_fields}
    return ProfileView(name, source, base, merged(base, params), origins, overridden)


def merged(base: Tendencies, overrides: Mapping[str, object]) -> dict[str, object]:
    """The fields `Tendencies` validates: the profile's, with `overrides` on top."""
    return {**base.model_dump(), **overrides}


def tendencies_of(
    profile: str, params: Mapping[str, object], inlined: InlinedProfile | None
) -> Tendencies:
    """What the simulated model acts on (ValueError: no such profile; ValidationError:
    a bad override)."""
    _, _, base = base_profile(profile, inlined)
    return Tendencies.model_validate(merged(base, params))
