"""An agent's `policy:` block: the preset and its overrides as the file writes them, and
the `PolicyConfig` they build, built once when the scenario is validated.

The written form is what the scenario dumps, so identity hashes, stored runs and
dotted-path overrides (`agents.researcher.policy.strategy=classify`) see the block
exactly as written; the built form is what the agent runs with.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

from errorflow.policies.config import PolicyConfig
from errorflow.policies.strategies import DEFAULT_STRATEGY, PRESETS, build_policy


def split(written: Mapping[str, object]) -> tuple[object, dict[str, object]]:
    """The strategy a block names (the default when it names none) and its overrides."""
    overrides = {key: value for key, value in written.items() if key != "strategy"}
    return written.get("strategy", DEFAULT_STRATEGY), overrides


@dataclass(frozen=True)
class AgentPolicy:
    written: Mapping[str, object]
    config: PolicyConfig

    @classmethod
    def build(cls, written: Mapping[str, object]) -> AgentPolicy:
        """Raises what `build_policy` raises (ValueError, pydantic's ValidationError)."""
        strategy, overrides = split(written)
        if not isinstance(strategy, str):
            names = ", ".join(PRESETS)
            raise ValueError(f"expected a strategy name ({names}), found {strategy!r}")
        return cls(copy.deepcopy(dict(written)), build_policy(strategy, overrides))

    @classmethod
    def default(cls) -> AgentPolicy:
        return cls.build({"strategy": DEFAULT_STRATEGY})

    @property
    def strategy(self) -> str:
        return self.config.strategy

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: object, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        """In a pydantic model: validated from the written mapping (a built AgentPolicy
        passes as it is), dumped as the written mapping."""
        mapping = handler.generate_schema(dict[str, object])

        def validate(
            value: object, validate_mapping: core_schema.ValidatorFunctionWrapHandler
        ) -> AgentPolicy:
            if isinstance(value, AgentPolicy):
                return value
            return cls.build(validate_mapping(value))

        return core_schema.no_info_wrap_validator_function(
            validate,
            mapping,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda policy: dict(policy.written), return_schema=mapping
            ),
        )
