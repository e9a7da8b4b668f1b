"""`errorflow --mqtt-client`: picks the client library for the command and its children."""

from __future__ import annotations

import os

import pytest

from errorflow.bus.url import CLIENT_ENV
from errorflow.cli.errors import UsageError
from errorflow.cli.main import build_parser
from errorflow.cli.mqtt_client_option import apply_mqtt_client_option


def test_the_option_sets_the_environment_children_inherit(monkeypatch: pytest.MonkeyPatch) -> None:
    # set, so that monkeypatch restores it after the option changed it (a delenv of an
    # unset variable records nothing: gmqtt leaked into every later test of the worker)
    monkeypatch.setenv(CLIENT_ENV, "aiomqtt")
    args = build_parser().parse_args(["--mqtt-client", "gmqtt", "scenarios"])
    apply_mqtt_client_option(args)
    assert os.environ[CLIENT_ENV] == "gmqtt"


def test_without_the_option_the_environment_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CLIENT_ENV, "aiomqtt")
    apply_mqtt_client_option(build_parser().parse_args(["scenarios"]))
    assert os.environ[CLIENT_ENV] == "aiomqtt"


def test_an_unknown_client_is_bad_input() -> None:
    with pytest.raises(UsageError, match="mqtt-client"):
        build_parser().parse_args(["--mqtt-client", "paho", "scenarios"])
