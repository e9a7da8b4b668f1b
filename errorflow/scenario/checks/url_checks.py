"""URLs in a scenario (a model server's `base_url`) are checked as the command line
checks a broker URL (errorflow.bus.url `check_http_url`), for every source of a
scenario: one that names no server is a problem at its line, not an exception when the
first request is made. A URL redacted for storage (a stored run's or a roll call's
scenario, `[REDACTED_URL]` for one that held a password) was checked when its run
started, and is not checked again."""

from __future__ import annotations

from errorflow.bus.url import URLError, check_http_url
from errorflow.scenario.problems import Marks, Problem, problem_at
from errorflow.scenario.spec.model import Scenario

#: How every redaction marker starts (errorflow.core.redact).
REDACTED = "[REDACTED"


def url_problems(scenario: Scenario, marks: Marks) -> list[Problem]:
    problems: list[Problem] = []
    for name, agent in scenario.agents.items():
        url = agent.model.base_url
        if url is None or REDACTED in url:
            continue
        try:
            check_http_url(url)
        except URLError as exc:
            problems.append(problem_at(marks, ("agents", name, "model", "base_url"), str(exc)))
    return problems
