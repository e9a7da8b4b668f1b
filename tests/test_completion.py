"""`errorflow completion`: scripts that complete commands, options and scenarios."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from errorflow.cli.main import main


def _script(capsys: pytest.CaptureFixture[str], shell: str) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


def _bash_complete(script: Path, *words: str) -> list[str]:
    """What bash offers for the last word, as a user pressing Tab would get it."""
    line = " ".join(f"'{w}'" for w in words)
    code = (
        f"source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
        '_shtab_errorflow; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(
        ["bash", "-c", code], capture_output=True, text=True, check=True, cwd=script.parent
    )
    return done.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completes_commands_options_and_scenarios(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "errorflow.bash"
    script.write_text(_script(capsys, "bash"))
    (tmp_path / "mine.yaml").write_text("")
    assert _bash_complete(script, "errorflow", "ru") == ["run", "runs"]
    assert _bash_complete(script, "errorflow", "run", "contam") == ["contamination"]
    assert _bash_complete(script, "errorflow", "run", "mi") == ["mine.yaml"]
    assert _bash_complete(script, "errorflow", "run", "x", "--propag") == ["--propagation"]
    assert _bash_complete(script, "errorflow", "compl") == ["completion"]


@pytest.mark.parametrize("shell", ["zsh", "tcsh"])
def test_other_shells_get_a_script_naming_every_command(
    shell: str, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(capsys, shell)
    for command in ("run", "sweep", "validate", "trace", "tui", "completion"):
        assert command in script


def test_an_unknown_shell_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "fish"]) == 2
    assert "invalid choice: 'fish'" in capsys.readouterr().err
