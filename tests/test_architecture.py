"""The architecture's rules, checked: import layers (import-linter contracts in
pyproject.toml), pure policies that load no drivers, payloads read only through the
protocol's typed readers, agents given their own view of a run rather than the whole
scenario, short functions, one exception root, and no history in comments."""

from __future__ import annotations

import ast
import importlib
import inspect
import io
import pkgutil
import re
import shutil
import subprocess
import sys
import tokenize
import types
from pathlib import Path

import pytest
from radon.complexity import cc_rank, cc_visit

import errorflow
from errorflow.core.errors import ErrorflowError

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "errorflow"
DRIVERS = {"aiomqtt", "amqtt", "aiosqlite", "textual", "anthropic"}
MAX_FUNCTION_LINES = 80


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys; from importlinter.cli import lint_imports; "
        "sys.exit(lint_imports(config_filename='pyproject.toml', no_logo=True, no_cache=True))"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_import_rules_hold() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("module", "line"),
    [
        ("policies/retry.py", "import errorflow.bus.endpoint"),  # policies beside the bus
        ("bus/endpoint.py", "import errorflow.agents.agent"),  # bus importing agents
        ("scoring/stats.py", "import errorflow.tui.palette"),  # the TUI from below
        ("policies/breaker.py", "import asyncio"),  # I/O in a pure policy
        ("scoring/stats.py", "import errorflow.agents.propagation"),  # scoring reading agents
        ("scoring/stats.py", "import errorflow.models.backend"),  # scoring reading models
        ("protocol/stop.py", "import errorflow.scenario.spec.model"),  # the protocol above core
        ("faults/tool.py", "import errorflow.scenario.spec.model"),  # faults above the scenario
        ("faults/bus.py", "import errorflow.bus.endpoint"),  # the bus's faults importing it
        ("models/sdk/failures.py", "import errorflow.models.anthropic.reply"),  # a vendor's
    ],
)
def test_import_rules_catch_a_broken_rule(tmp_path: Path, module: str, line: str) -> None:
    """The same rules on a copy of the package with one forbidden import added."""
    shutil.copytree(PACKAGE, tmp_path / "errorflow", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "errorflow" / module
    target.write_text(target.read_text() + f"\n{line}  # noqa\n")
    result = _lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout
    assert "BROKEN" in result.stdout


#: What the fault families may import: the floors below them, and pydantic.
FAULTS_MAY_IMPORT = ("errorflow.core", "errorflow.protocol", "errorflow.faults", "pydantic")


def _imports(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_faults_import_only_core_protocol_and_pydantic() -> None:
    """The families sit below the scenario and the bus: their glue lives above them."""
    foreign = sorted(
        f"{p.relative_to(ROOT)}: {name}"
        for p in sorted((PACKAGE / "faults").glob("*.py"))
        for name in _imports(p.read_text())
        if name.split(".")[0] not in sys.stdlib_module_names
        and not any(name == m or name.startswith(f"{m}.") for m in FAULTS_MAY_IMPORT)
        and name != "pydantic_core"
    )
    assert foreign == []


def test_pure_policies_load_no_drivers() -> None:
    code = (
        "import errorflow.policies.retry, errorflow.policies.breaker, "
        "errorflow.protocol.events, sys; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{sorted(DRIVERS)!r}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert out.strip() == "[]"


#: What hands over the whole scenario: an agent is given its AgentPlan (and its tool
#: world and model backends), made at the edge (errorflow.runtime.participants).
WHOLE_SCENARIO = frozenset({"Scenario", "RunPlan"})


def _whole_scenario_uses(source: str, path: str) -> list[str]:
    """Imports of the whole scenario (`from ... import Scenario`, or `RunPlan`, whose
    `.scenario` is the whole of it), and reads of it through a module (`model.Scenario`)."""
    lines = set()
    for node in ast.walk(ast.parse(source)):
        imported = isinstance(node, ast.ImportFrom) and any(
            a.name in WHOLE_SCENARIO for a in node.names
        )
        read = isinstance(node, ast.Attribute) and node.attr in WHOLE_SCENARIO
        if imported or read:
            lines.add(getattr(node, "lineno", 0))
    return [f"{path}:{n}" for n in sorted(lines)]


def test_agents_never_receive_the_whole_scenario() -> None:
    uses = [
        u
        for p in sorted((PACKAGE / "agents").rglob("*.py"))
        for u in _whole_scenario_uses(p.read_text(), str(p.relative_to(ROOT)))
    ]
    assert uses == []


def test_the_scenario_check_sees_the_whole_scenario_come_in() -> None:
    source = (
        "from errorflow.scenario.spec.model import AgentSpec, Scenario\n"
        "from errorflow.scenario.run_plan import RunPlan\n"
        "from errorflow.scenario.spec import model\n"
        "def f(s: model.Scenario) -> None: ...\n"
        "from errorflow.scenario.agent_plan import AgentPlan\n"  # its own view: fine
        "from errorflow.scenario.loader import ScenarioError\n"
    )
    assert _whole_scenario_uses(source, "m.py") == ["m.py:1", "m.py:2", "m.py:4"]


#: Reading a dict: what a raw payload read looks like (`payload.get(...)`, `.items()`).
DICT_READS = frozenset({"get", "items", "keys", "values", "pop", "setdefault"})


def _raw_payload_reads(source: str, path: str) -> list[str]:
    """Subscripts and dict reads on a name or attribute called `payload`: a message's
    payload is read through errorflow.protocol's typed readers (`ResultPayload.from_wire`
    and the like), which decide once what a malformed field reads as."""

    def is_payload(node: ast.expr) -> bool:
        return (isinstance(node, ast.Name) and node.id == "payload") or (
            isinstance(node, ast.Attribute) and node.attr == "payload"
        )

    lines = set()
    for node in ast.walk(ast.parse(source)):
        subscript = isinstance(node, ast.Subscript) and is_payload(node.value)
        read = (
            isinstance(node, ast.Attribute) and node.attr in DICT_READS and is_payload(node.value)
        )
        if subscript or read:
            lines.add(getattr(node, "lineno", 0))
    return [f"{path}:{n}" for n in sorted(lines)]


def test_payloads_are_read_only_through_the_protocol() -> None:
    raw = [
        f
        for p in sorted(PACKAGE.rglob("*.py"))
        if p.parent.name != "protocol"
        for f in _raw_payload_reads(p.read_text(), str(p.relative_to(ROOT)))
    ]
    assert raw == []


def test_the_payload_check_sees_a_raw_read() -> None:
    source = (
        "a = env.payload.get('round')\n"
        "b = payload['trace']\n"
        "c = m.payload['answer']['text']\n"
        "for k, v in payload.items(): pass\n"
        "d = ResultPayload.from_wire(env.payload).round\n"  # the typed reader: fine
        "e = parse_event(env.payload)\n"
    )
    assert _raw_payload_reads(source, "m.py") == ["m.py:1", "m.py:2", "m.py:3", "m.py:4"]


def _long_functions(source: str, path: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                found.append(f"{path}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_longer_than_80_lines() -> None:
    long = [
        f
        for p in sorted(PACKAGE.rglob("*.py"))
        for f in _long_functions(p.read_text(), str(p.relative_to(ROOT)))
    ]
    assert long == []


def test_the_length_check_sees_a_long_function() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert _long_functions(f"def f():\n{body}\n", "m.py") == ["m.py:1 f (81 lines)"]


def test_no_function_of_radon_grade_e_or_worse() -> None:
    """Cyclomatic complexity: grade E starts at 31 (radon's scale)."""
    worse = [
        f"{p.relative_to(ROOT)}:{b.lineno} {b.name} ({b.complexity})"
        for p in sorted(PACKAGE.rglob("*.py"))
        for b in cc_visit(p.read_text())
        if cc_rank(b.complexity) in ("E", "F")
    ]
    assert worse == []


#: Exceptions errorflow defines outside the root, on purpose.
OUTSIDE_ROOT = {
    # SIGTERM raised as Ctrl-C is: a KeyboardInterrupt, so no `except Exception` stops it.
    "errorflow.cli.signals.Terminated",
}
#: Code a user writes, shown as an example: it raises its own exceptions, not errorflow's.
EXAMPLES = "errorflow.examples"


def _outside_root(module: types.ModuleType) -> list[str]:
    """The exception classes `module` defines that do not derive from ErrorflowError."""
    found = []
    for value in vars(module).values():
        if not (inspect.isclass(value) and issubclass(value, BaseException)):
            continue
        name = f"{value.__module__}.{value.__qualname__}"
        if value.__module__ == module.__name__ and not issubclass(value, ErrorflowError):
            found.append(name)
    return [name for name in found if name not in OUTSIDE_ROOT]


def _errorflow_modules() -> list[types.ModuleType]:
    names = [
        m.name
        for m in pkgutil.walk_packages(errorflow.__path__, "errorflow.")
        if not m.name.endswith("__main__") and not m.name.startswith(EXAMPLES)
    ]
    return [importlib.import_module(name) for name in names]


def test_every_exception_derives_from_errorflow_error() -> None:
    outside = [name for module in _errorflow_modules() for name in _outside_root(module)]
    assert outside == []


def test_the_root_check_sees_a_stray_exception() -> None:
    module = types.ModuleType("errorflow.stray")
    exec(
        "from errorflow.core.errors import ErrorflowError\n"
        "class Stray(ValueError): pass\n"
        "class Rooted(ErrorflowError, ValueError): pass\n",
        module.__dict__,
    )
    assert _outside_root(module) == ["errorflow.stray.Stray"]


#: History belongs to the commits and bench/RESULTS.md; a comment says why, today.
ISSUE = re.compile(r"issue #\d+", re.IGNORECASE)


def _history(source: str, path: str) -> list[str]:
    """Comments and docstrings of `source` that name an issue."""
    found = [
        f"{path}:{tok.start[0]}"
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT and ISSUE.search(tok.string)
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc and ISSUE.search(doc):
                found.append(f"{path}:{getattr(node, 'lineno', 1)}")
    return found


def test_no_comment_or_docstring_names_an_issue() -> None:
    found = [
        f
        for p in sorted(PACKAGE.rglob("*.py"))
        for f in _history(p.read_text(), str(p.relative_to(ROOT)))
    ]
    assert found == []


def test_the_history_check_sees_an_issue_in_a_comment_and_a_docstring() -> None:
    word = "Issue"  # built, so this file itself names no issue
    source = (
        f'def f():\n    """Since {word} #19."""\n'
        f'    return 1  # see {word.lower()} #7\nx = "{word.lower()} #3"\n'
    )
    assert sorted(_history(source, "m.py")) == ["m.py:1", "m.py:3"]


MAX_MODULE_LINES = 600
MAX_FOLDER_MODULES = 20


def _long_modules(root: Path) -> list[str]:
    return [
        f"{p.relative_to(root)} ({n} lines)"
        for p in sorted(root.rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    ]


def _crowded_folders(root: Path) -> list[str]:
    """Modules per folder, `__init__.py` not counted."""
    counts = {
        d: sum(1 for p in d.glob("*.py") if p.name != "__init__.py")
        for d in [root, *sorted(p for p in root.rglob("*") if p.is_dir())]
    }
    return [
        f"{d.relative_to(root.parent)} ({n} modules)"
        for d, n in counts.items()
        if n > MAX_FOLDER_MODULES
    ]


def test_no_module_over_600_lines() -> None:
    assert _long_modules(PACKAGE) == []


def test_no_folder_over_20_modules() -> None:
    assert _crowded_folders(PACKAGE) == []


def test_the_size_checks_see_a_long_module_and_a_crowded_folder(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "long.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    for i in range(MAX_FOLDER_MODULES):
        (package / f"m{i}.py").write_text("")
    (package / "__init__.py").write_text("")
    assert _long_modules(package) == ["long.py (601 lines)"]
    assert _crowded_folders(package) == ["pkg (21 modules)"]
