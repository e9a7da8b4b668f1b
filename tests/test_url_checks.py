"""A model server's `base_url` in a scenario names a server, or is a problem at its line:
from a file, from `--set`, never an exception at the first request."""

from __future__ import annotations

import pytest

from errorflow.scenario.bundled import bundled
from errorflow.scenario.loader import load_text
from errorflow.scenario.overrides import apply
from errorflow.scenario.problems import ScenarioError

TEXT = bundled()["contamination"].read_text()
WRITER = "  writer:\n    role: writer\n"
MODEL = "    model: {backend: simulated, profile: small-local}\n"


def with_base_url(url: str) -> str:
    assert WRITER + MODEL in TEXT
    model = f"    model: {{backend: anthropic, model: m, base_url: '{url}'}}\n"
    return TEXT.replace(WRITER + MODEL, WRITER + model)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://[::1", "Invalid IPv6 URL"),
        ("http://127.0.0.1:0", "1-65535"),
        ("localhost:11434", "http:// or https://"),
        ("http://h st", "U+0020"),
    ],
)
def test_a_base_url_that_names_no_server_is_a_problem_at_its_line(url: str, said: str) -> None:
    text = with_base_url(url)
    with pytest.raises(ScenarioError) as info:
        load_text(text, "s.yaml")
    (problem,) = info.value.problems
    assert problem.path == "agents.writer.model.base_url" and said in problem.message
    assert problem.line == text.splitlines().index(WRITER.splitlines()[0]) + 3


def test_an_override_is_checked_too_and_a_redacted_url_is_not() -> None:
    scenario = load_text(with_base_url("http://localhost:11434/v1"))
    with pytest.raises(ScenarioError, match="base_url: URL port is not a number"):
        apply(scenario, {"agents.writer.model.base_url": "http://h:99999"})
    redacted = apply(scenario, {"agents.writer.model.base_url": "[REDACTED_URL]"})
    assert redacted.agents["writer"].model.base_url == "[REDACTED_URL]"  # a stored run's
