"""Profile files named by a scenario, read once when the scenario is loaded.

A scenario's `model: {profile: ./my-model.yaml}` names a file relative to the scenario
file (the working directory for a scenario that has no file: text, JSON, an override).
The loader puts the file's content next to the path (`model.profile_file`), so the
scenario stored with a run carries its profile: it resumes, replays and reports the
same even if the file changes or goes. A scenario that already carries the content of
the path it names (a stored run's) is not read again; a profile that names no file
drops any content it carried (an override that went back to a built-in profile).
"""

from __future__ import annotations

from pathlib import Path

from errorflow.scenario.problems import Marks, NodePath, Problem, problem_at
from errorflow.scenario.provenance.profile_file import ProfileError, is_profile_path, read_profile

PROFILE_FIELD = "profile_file"


def inline_profiles(data: dict[str, object], base_dir: Path | None, marks: Marks) -> list[Problem]:
    """Read the profile files `data`'s agents name into it (in place); the problems of
    files that cannot be read, each at the `profile:` that names it."""
    agents = data.get("agents")
    if not isinstance(agents, dict):
        return []
    problems: list[Problem] = []
    for name, agent in agents.items():
        model = agent.get("model") if isinstance(agent, dict) else None
        if not isinstance(model, dict):
            continue
        profile = model.get("profile")
        if not isinstance(profile, str) or not is_profile_path(profile):
            model.pop(PROFILE_FIELD, None)
            continue
        carried = model.get(PROFILE_FIELD)
        if isinstance(carried, dict) and carried.get("path") == profile:
            continue
        path = Path(profile).expanduser()
        if not path.is_absolute():
            path = (base_dir or Path.cwd()) / path
        try:
            doc = read_profile(path)
        except ProfileError as exc:
            at: NodePath = ("agents", str(name), "model", "profile")
            problems.append(problem_at(marks, at, str(exc)))
            continue
        model[PROFILE_FIELD] = {"path": profile, "profile": doc.model_dump(mode="json")}
    return problems
