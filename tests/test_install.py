"""What `pip install errorflow` puts in site-packages: nothing that shadows another
package (gmqtt's wheel ships a top-level `tests`, so gmqtt is an extra)."""

from __future__ import annotations

import re
from importlib import metadata

import pytest

from errorflow.bus.url import missing_client, parse_broker_url
from errorflow.cli.main import main

GENERIC_TOP_LEVEL = {"tests", "test", "docs", "examples", "benchmarks", "scripts"}


def _core_requirements() -> list[str]:
    required = metadata.requires("errorflow") or []
    return [re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0] for r in required if "extra ==" not in r]


def test_the_core_installs_no_generic_top_level_package() -> None:
    names = _core_requirements()
    assert {"aiomqtt", "pydantic", "aiosqlite", "textual", "anthropic"} <= set(names)
    assert "gmqtt" not in names
    for name in names:
        files = metadata.files(name) or []
        tops = {f.parts[0] for f in files if len(f.parts) > 1}
        assert not tops & GENERIC_TOP_LEVEL, (name, sorted(tops & GENERIC_TOP_LEVEL))


def test_the_check_sees_gmqtts_stray_tests_package() -> None:
    files = metadata.files("gmqtt") or []  # installed here as part of the dev extra
    assert "tests" in {f.parts[0] for f in files if len(f.parts) > 1}


@pytest.fixture
def no_gmqtt(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "gmqtt" else real(name, *a)
    )


@pytest.mark.usefixtures("no_gmqtt")
def test_without_gmqtt_choosing_it_is_bad_input_that_says_how_to_install_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ERRORFLOW_MQTT_CLIENT", "aiomqtt")  # restored after the option sets it
    assert missing_client("gmqtt") is not None and missing_client("aiomqtt") is None
    assert main(["--mqtt-client", "gmqtt", "scenarios"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'errorflow[gmqtt]'" in err and "Traceback" not in err
    with pytest.raises(ValueError, match=r"client=gmqtt: .*errorflow\[gmqtt\]"):
        parse_broker_url("mqtt://127.0.0.1:1883?client=gmqtt")
