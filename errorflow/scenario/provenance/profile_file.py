"""Profile files: a simulated model's behaviour parameters, each with its origin.

`errorflow calibrate` writes one; a scenario names it (`model: {profile: ./m.yaml}`,
relative to the scenario file). Every behaviour parameter (`p_...`) is listed with its
value and exactly one of `measured`, `fitted` or `assumed` (errorflow.scenario.spec.
provenance); the token parameters may be left out (errorflow's estimate, assumed).

    format: errorflow-profile
    version: 1
    name: my-model
    parameters:
      p_repair_with_options:
        value: 0.85
        measured: {model: qwen2.5:7b, backend: openai, date: 2026-12-04,
                   family: wrong_arg_with_options, probes: 40, successes: 34,
                   interval: [0.71, 0.93]}
      p_keep_own_evidence:
        value: 0.8
        assumed: not probed

The loader reads the file once and keeps its content in the scenario
(`ModelSpec.profile_file`), so a stored run resumes and reports without it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from errorflow.core.errors import InputError
from errorflow.core.regular_file import FileRefused, read_regular
from errorflow.core.shapes import Ident, Strict
from errorflow.scenario.provenance.builtin import TOKEN_FIELDS, TOKEN_REASON
from errorflow.scenario.provenance.origin import Entry, Origin
from errorflow.scenario.spec.profiles import Tendencies

FORMAT = "errorflow-profile"
VERSION = 1
MAX_PROFILE_BYTES = 256 * 1024
#: The parameters a profile file must list (the token ones are optional).
BEHAVIOUR_FIELDS = tuple(f for f in Tendencies.model_fields if f not in TOKEN_FIELDS)


class ProfileError(InputError):
    """A profile file that cannot be used, said in one line."""


class ProfileDoc(Strict):
    format: Literal["errorflow-profile"]
    version: Literal[1]
    name: Ident
    description: str = Field(default="", max_length=2000)
    parameters: dict[str, Entry]

    @model_validator(mode="after")
    def _every_parameter(self) -> ProfileDoc:
        unknown = sorted(set(self.parameters) - set(Tendencies.model_fields))
        if unknown:
            raise ValueError(
                f"unknown parameter(s) {', '.join(unknown)}; known: "
                f"{', '.join(Tendencies.model_fields)}"
            )
        missing = [f for f in BEHAVIOUR_FIELDS if f not in self.parameters]
        if missing:
            raise ValueError(
                f"missing parameter(s) {', '.join(missing)}: a profile lists every behaviour "
                "parameter with where it came from (measured, fitted or assumed)"
            )
        self.tendencies()  # values in range
        return self

    def tendencies(self) -> Tendencies:
        values: dict[str, object] = {}
        for name, entry in self.parameters.items():
            is_int = Tendencies.model_fields[name].annotation is int
            values[name] = int(entry.value) if is_int else entry.value
        return Tendencies.model_validate(values)

    def origins(self) -> dict[str, Origin]:
        """Every parameter's origin, in field order (a token parameter left out:
        errorflow's estimate)."""
        return {
            f: self.parameters[f].origin if f in self.parameters else Origin(assumed=TOKEN_REASON)
            for f in Tendencies.model_fields
        }


class InlinedProfile(Strict):
    """A profile file as a scenario keeps it: the path it named, and the content."""

    path: str = Field(min_length=1, max_length=1000)
    profile: ProfileDoc


def is_profile_path(name: str) -> bool:
    """Whether a scenario's `profile:` names a file rather than a built-in profile."""
    return name.endswith((".yaml", ".yml", ".json")) or "/" in name or "\\" in name


def parse_profile(text: str, where: str) -> ProfileDoc:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ProfileError(f"{where}: not YAML ({' '.join(str(exc).split())[:200]})") from None
    try:
        return ProfileDoc.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(p) for p in first["loc"])
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        msg = first["msg"].removeprefix("Value error, ")
        raise ProfileError(f"{where}: {at + ': ' if at else ''}{msg}{more}") from None


def read_profile(path: Path) -> ProfileDoc:
    try:
        raw = read_regular(path, MAX_PROFILE_BYTES)
    except FileRefused as exc:
        raise ProfileError(f"{path}: {exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ProfileError(f"{path}: expected UTF-8 text") from None
    return parse_profile(text, str(path))


def profile_yaml(doc: ProfileDoc) -> str:
    """The file text of a profile (the order of its parameters kept)."""
    data = json.loads(doc.model_dump_json(exclude_none=True, exclude_defaults=False))
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
