"""What the TUI is watching and how to get more of it: the first source, a rerun, the
run with propagation flipped, and the other arm of a comparison."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from errorflow.core.errors import ErrorflowError
from errorflow.scenario.overrides import with_settings
from errorflow.scenario.spec.model import Scenario
from errorflow.tui.sources import (
    Attach,
    BusHolder,
    LiveRun,
    Replay,
    Source,
    StoredRun,
    find_arm,
    flipped,
)

Mode = Literal["live", "attach", "replay"]


class SessionError(ErrorflowError):
    """An action this session cannot do (shown to the user, not raised out of the app)."""


@dataclass
class Session:
    mode: Mode
    holder: BusHolder
    db_path: Path
    scenario: Scenario | None = None  # with trials / seed / propagation applied
    target: str | None = None  # the run to attach to or replay
    #: The pace the main screen starts at (errorflow.tui.pace): 0 shows everything as
    #: it comes; the commands start at 1, a pace a person can watch.
    speed: float = 0.0
    stored: StoredRun | None = None  # replay: the stored run
    # attach: the run's key, to verify what it shows (None: shown as unverified)
    run_key: bytes | None = None

    def first(self) -> Source:
        if self.mode == "replay":
            assert self.stored is not None
            return Replay(self.db_path, self.stored.run_id, self.stored.scenario)
        if self.mode == "attach":
            assert self.target is not None
            return Attach(self.target, self.holder, self.scenario, key=self.run_key)
        return LiveRun(self._need_scenario(), self.holder, self.db_path)

    def rerun(self) -> Source:
        if self.mode == "replay":
            return self.first()
        self.mode = "live"  # rerunning an attached run means running it ourselves
        return LiveRun(self._need_scenario(), self.holder, self.db_path)

    def flip(self) -> Source:
        self.scenario = flipped(self._need_scenario())
        self.mode = "live"
        return LiveRun(self.scenario, self.holder, self.db_path)

    def arm(self, propagation: str) -> Source:
        """A source for the same scenario, seed and trials with `propagation`: a stored
        run when replaying and one exists, else a fresh run."""
        scenario = with_settings(self._need_scenario(), propagation=propagation)
        if self.mode == "replay" and self.stored is not None:
            like = StoredRun(
                self.stored.run_id,
                scenario,
                scenario.seed,
                scenario.trials,
                propagation,
                "finished",
            )
            found = find_arm(self.db_path, like, propagation)
            if found is not None:
                return Replay(self.db_path, found.run_id, found.scenario)
        return LiveRun(scenario, self.holder, self.db_path)

    @property
    def can_run(self) -> bool:
        """Whether this session can start runs (rerun, flip, compare): it knows the
        scenario (an attached run it was not given the scenario of cannot)."""
        return self.scenario is not None

    def _need_scenario(self) -> Scenario:
        if self.scenario is None:
            raise SessionError("needs the scenario: start with `errorflow tui SCENARIO "
                               "--attach RUN_ID` (or keep the run in --db)")  # fmt: skip
        return self.scenario
