"""Where each configured model fault (`agents.NAME.model.faults`) fired, and the trials
where it never did: by its place in the scenario (two faults of one kind stay apart),
counting the model attempts it failed. Every agent counts the `model_fault` events of its
trial and sends the counts with its result, under `trace.model_faults`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from errorflow.faults.model import ModelFault, model_fault_path
from errorflow.faults.tally import PlacedFaultTally
from errorflow.protocol.result import model_faults_of


class _Model(Protocol):
    @property
    def faults(self) -> Sequence[ModelFault]: ...


class _Agent(Protocol):
    @property
    def model(self) -> _Model: ...


class ModelFaultTally(PlacedFaultTally):
    def __init__(self, agents: Mapping[str, _Agent]) -> None:
        kinds = {
            model_fault_path(name, i): fault.kind
            for name, agent in agents.items()
            for i, fault in enumerate(agent.model.faults)
        }
        super().__init__(kinds, model_faults_of)
