"""Defences a scenario can switch on for an agent (the multi-agent resilience literature).

- `challenge` (Challenger, Huang et al. 2025): the agent re-checks each claim it
  receives with its own tools, with this probability per claim it can check, and
  trusts its own evidence over the sender's.
- `inspector` (Inspector): a checker on every edge into the agent: before the agent
  reads a message, the inspector verifies a share (`check`) of its claims with its
  tools and corrects (or blocks) what is contradicted. With `genealogy` (the
  lineage guard of "From Spark to Fire", 2026), one contradicted claim quarantines
  every claim of the same lineage (the agent that first stated it): each is re-derived
  with the tools, or withheld when it cannot be.
Their model and tool calls are counted with the agent's, like any other work.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from errorflow.core.shapes import Ident, Probability, Strict


class InspectorSpec(Strict):
    tools: list[Ident] = Field(min_length=1, max_length=32)
    #: Share of each message's claims the inspector verifies.
    check: Probability = 1.0
    on_wrong: Literal["correct", "block"] = "correct"
    genealogy: bool = False
