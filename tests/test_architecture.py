"""The architecture's rules, checked: import layers (import-linter contracts in
pyproject.toml), pure policies that load no drivers, and short functions."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from radon.complexity import cc_rank, cc_visit

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
