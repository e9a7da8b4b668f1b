"""Faults injected into an agent (`agents.NAME.faults`), not into its tools.

The shapes follow the multi-agent resilience literature:
- `corrupt` (AutoInject, Huang et al. 2025): a fraction `p` of the agent's outgoing
  messages is rewritten in transit and, within each, a fraction `claims` of its claims
  gets a plausible but wrong value. The agent itself still believes the right values.
- `faulty` (AutoTransform): the agent's model errs: each claim it states is wrong with
  probability `p`, in every message it sends (it believes the wrong value).
- `drop`: a message is silently lost (the agent thinks it sent it).
- `hang`: the agent never replies; the recipient waits its `wait_s` and goes on
  without the message.
- `crash` (errorflow.scenario.crash_fault_model): the agent dies at a model call.
- `slow`: the reply takes `delay_s` more simulated seconds; past the recipient's
  `wait_s` it is too late and counts as no reply.
Every draw comes from the agent's own fault stream (errorflow.agents.agent_faults).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from errorflow.scenario.crash_fault_model import CrashFault
from errorflow.scenario.fault_model import Probability
from errorflow.scenario.spec.world_model import Ident, Strict


class _AgentFault(Strict):
    #: Probability per message (corrupt, drop, hang, slow) or per claim (faulty).
    p: Probability
    #: Only messages to these recipients (`runner` for final results); default: all.
    to: list[Ident] | None = Field(default=None, max_length=64)


class CorruptFault(_AgentFault):
    kind: Literal["corrupt"]
    #: Within a corrupted message, the probability that each claim is rewritten.
    claims: Probability = 0.6


class FaultyFault(_AgentFault):
    kind: Literal["faulty"]


class DropFault(_AgentFault):
    kind: Literal["drop"]


class HangFault(_AgentFault):
    kind: Literal["hang"]


class SlowFault(_AgentFault):
    kind: Literal["slow"]
    delay_s: float = Field(default=30.0, gt=0, le=86_400)


AgentFault = Annotated[
    CorruptFault | FaultyFault | DropFault | HangFault | SlowFault | CrashFault,
    Field(discriminator="kind"),
]

#: Kinds that decide the fate of one outgoing message (a copy per recipient).
MESSAGE_FATES = ("drop", "hang", "slow")
