"""A python agent's `function:` at validation: resolved against the scenario file's
folder, imported, and refused in one line naming the agent and the reference when it is
missing, not importable, not async or takes the wrong arguments."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from errorflow.cli.main import main
from errorflow.cli.scenario_input import parse_sets, scenario_from
from errorflow.scenario.loader import load
from errorflow.scenario.problems import ScenarioError

CODE = """
async def good(ctx):
    return {}

def sync(ctx):
    return {}

async def two(ctx, other):
    return {}

class Desk:
    async def __call__(self, ctx):
        return {}

desk = Desk()
answer = 42
"""


def scenario(
    folder: Path, function: str | None, behaviour: str | None = "python", extra: str = ""
) -> Path:
    (folder / "team").mkdir(exist_ok=True)
    (folder / "team" / "desk.py").write_text(CODE)
    (folder / "desk.py").write_text(CODE)
    lines = [f"role: {'clerk' if behaviour else 'researcher'}", "tools: [kpi]"]
    if behaviour:
        lines.append(f"behaviour: {behaviour}")
    if function:
        lines.append(f"function: '{function}'")
    if extra:
        lines.append(extra)
    agent = "{" + ", ".join(lines) + "}"
    text = f"""
    name: refs
    world: {{metrics: {{m: 1}}}}
    tools: {{kpi: {{kind: metric_store}}}}
    agents:
      clerk: {agent}
    task:
      prompt: m?
      needs: [{{id: m, tool: kpi, arg: name, wording: m, value: m}}]
    """
    path = folder / "refs.yaml"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize(
    "ref", ["desk.py:good", "desk:good", "team.desk:good", "team/desk.py:desk", "desk:Desk"]
)
def test_references_resolve_against_the_scenario_folder(
    tmp_path: Path, ref: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir("/")  # not the scenario's folder
    if ref == "desk:Desk":  # a class is called with no argument
        with pytest.raises(ScenarioError, match="must take one argument"):
            load(scenario(tmp_path, ref))
        return
    s = load(scenario(tmp_path, ref))
    assert s.agents["clerk"].function is not None
    assert s.agents["clerk"].function.startswith(str(tmp_path.resolve()))


@pytest.mark.parametrize("ref", ["desk.py:good", "desk:good", "team.desk:good"])
def test_a_reference_set_on_the_command_line_resolves_against_the_scenario_folder_too(
    tmp_path: Path, ref: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = scenario(tmp_path, "desk.py:desk")
    monkeypatch.chdir("/")  # not the scenario's folder
    sets = parse_sets([f"agents.clerk.function={ref}"])
    s = scenario_from(str(path), sets)
    assert s.agents["clerk"].function is not None
    assert s.agents["clerk"].function.startswith(str(tmp_path.resolve()))


def test_a_value_of_vary_resolves_against_the_scenario_folder_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = scenario(tmp_path, "desk.py:desk")
    monkeypatch.chdir("/")  # not the scenario's folder
    vary = "agents.clerk.function=desk:good,team.desk:good"
    argv = ["sweep", str(path), "--vary", vary, "--trials", "1", "--no-baseline", "--json"]
    code = main([*argv, "--db", str(tmp_path / "s.db")])
    assert code == 0, capsys.readouterr().err
    cells = json.loads(capsys.readouterr().out)["cells"]
    assert sorted(cells) == ["desk:good", "team.desk:good"]


def test_a_tools_module_beside_the_scenario_is_found_as_an_agents_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "shop.py").write_text("def price(sku: str) -> int:\n    return 3\n")
    text = """
    name: tool-module
    tools: {price: {kind: python, function: 'shop:price'}}
    agents: {clerk: {role: researcher, tools: [price]}}
    task:
      prompt: p
      needs: [{id: p, tool: price, wording: the price, args: {sku: A}}]
    """
    path = tmp_path / "t.yaml"
    path.write_text(textwrap.dedent(text))
    monkeypatch.chdir("/")
    assert load(path).tools["price"].function == f"{(tmp_path / 'shop.py').resolve()}:price"


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("desk.py:missing", "python agent 'clerk': function 'DIR/desk.py:missing': "),
        ("nowhere.py:good", "python agent 'clerk': no such file: DIR/nowhere.py"),
        ("no_such_module_xyz:good", "python agent 'clerk': no module named 'no_such_module_xyz'"),
        ("desk:sync", "python agent 'clerk': 'DIR/desk.py:sync' is not async"),
        ("desk:two", "python agent 'clerk': 'DIR/desk.py:two' must take one argument"),
        ("desk:answer", "python agent 'clerk': function 'DIR/desk.py:answer' is a int"),
    ],
)
def test_validate_says_what_is_wrong_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ref: str, message: str
) -> None:
    path = scenario(tmp_path, ref)
    code = main(["validate", str(path)])
    err = capsys.readouterr().err.strip()
    assert code != 0
    # The problem is one line, at the agent's `function` in the file.
    (line,) = [x for x in err.splitlines() if "agents.clerk.function" in x]
    assert line.startswith(f"{path}:") and f"{path}:" in line
    assert message.replace("DIR", str(tmp_path.resolve())) in line


def test_function_and_behaviour_go_together(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="a python agent needs `function"):
        load(scenario(tmp_path, None))
    with pytest.raises(ScenarioError, match="`function` is for `behaviour: python`"):
        load(scenario(tmp_path, "desk:good", behaviour=None))


def test_function_timeout_goes_with_python_and_old_files_dump_as_before(tmp_path: Path) -> None:
    s = load(scenario(tmp_path, "desk:good"))
    assert s.agents["clerk"].function_timeout_s == 60.0
    assert "function_timeout_s" not in s.agents["clerk"].model_dump()  # hashes as before
    s = load(scenario(tmp_path, "desk:good", extra="function_timeout_s: 2.5"))
    assert s.agents["clerk"].function_timeout_s == 2.5
    assert s.agents["clerk"].model_dump()["function_timeout_s"] == 2.5
    with pytest.raises(ScenarioError, match="`function_timeout_s` is for `behaviour: python`"):
        load(scenario(tmp_path, None, behaviour=None, extra="function_timeout_s: 5"))
    with pytest.raises(ScenarioError, match="function_timeout_s"):
        load(scenario(tmp_path, "desk:good", extra="function_timeout_s: 0"))


def test_a_framework_module_without_its_extra_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "fw.py").write_text("import no_such_framework_xyz\nasync def run(ctx): ...\n")
    path = scenario(tmp_path, "fw:run")
    with pytest.raises(ScenarioError) as caught:
        load(path)
    assert "python agent 'clerk': importing" in str(caught.value)
    assert "no_such_framework_xyz" in str(caught.value)
    assert "(install 'no_such_framework_xyz')" in str(caught.value)


def test_a_package_an_extra_provides_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "gmqtt", None)  # as if not installed
    (tmp_path / "fw.py").write_text("import gmqtt\nasync def run(ctx): ...\n")
    with pytest.raises(ScenarioError) as caught:
        load(scenario(tmp_path, "fw:run"))
    assert "pip install 'errorflow[gmqtt]'" in str(caught.value)
