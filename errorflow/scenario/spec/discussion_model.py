"""Discussion: agents that exchange answers with their `peers` for a number of rounds.

Flat, star, tree, complete and cycle graphs are peers with rounds (the literature's
debate and discussion structures); sends_to keeps the one-way edges, so hierarchies
mix both (A -> (B <-> C): A sends to B and C, who are peers).

Round 0 is an agent's ordinary work on its inputs (the task, or upstream results).
In each of the `rounds` that follow, every member reads its peers' latest answers
(errorflow.models.deliberation) and revises its own. After the last round the members
that `decide` send their answer on (to their sends_to, or as the trial's final result);
the others have spoken and stop. A member that decides nothing sends nothing on.
"""

from __future__ import annotations

from pydantic import Field

from errorflow.core.shapes import Ident, Strict


class DiscussionSpec(Strict):
    #: Exchange rounds after round 0 (used only when agents have peers).
    rounds: int = Field(default=1, ge=1, le=10)
    #: Members whose last answer goes on (default: every member). Agents not in a
    #: discussion always pass their answer on.
    decides: list[Ident] | None = Field(default=None, max_length=64)
