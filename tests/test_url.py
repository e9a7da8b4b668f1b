import os
import re
from pathlib import Path

import pytest

from errorflow.bus.url import (
    MAX_TLS_FILE_BYTES,
    BrokerURLError,
    URLError,
    check_http_url,
    parse_broker_url,
)


def test_plain_and_credentials() -> None:
    url = parse_broker_url("mqtt://127.0.0.1:1884", env={})
    assert (url.host, url.port, url.username, url.tls) == ("127.0.0.1", 1884, None, False)
    url = parse_broker_url("mqtt://alice:s3cr%40t@broker:1883", env={})
    assert (url.username, url.password) == ("alice", "s3cr@t")
    assert "s3cr" not in str(url) and "s3cr" not in repr(url)


def test_credentials_from_environment() -> None:
    env = {"ERRORFLOW_MQTT_USERNAME": "bob", "ERRORFLOW_MQTT_PASSWORD": "pw"}
    url = parse_broker_url("mqtt://h", env=env)
    assert (url.username, url.password, url.port) == ("bob", "pw", 1883)


def test_tls_options(tmp_path: Path) -> None:
    for name in ("ca.pem", "c.pem", "k.pem"):
        (tmp_path / name).write_text("x")
    ca, cert, key = (str(tmp_path / n) for n in ("ca.pem", "c.pem", "k.pem"))
    url = parse_broker_url(f"mqtts://h?ca={ca}&cert={cert}&key={key}", env={})
    assert url.tls and url.port == 8883
    assert (url.ca_file, url.cert_file, url.key_file) == (ca, cert, key)
    with pytest.raises(BrokerURLError, match="no such file"):
        parse_broker_url("mqtts://h?ca=/nonexistent/ca.pem", env={})


@pytest.mark.parametrize("bad", ["http://h:1", "mqtt://", "mqtt://h:99999", "mqtt://h?x=1"])
def test_bad_urls(bad: str) -> None:
    with pytest.raises(BrokerURLError):
        parse_broker_url(bad, env={})


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ("mqtt://[::1", "Invalid IPv6 URL"),
        ("mqtt://[zz]:1", "does not appear to be an IPv4 or IPv6 address"),
        ("mqtt://127.0.0.1:0", "found '0'"),  # not "the default port"
        ("mqtt://h:-1", "found '-1'"),
        ("mqtt://h:\u0661", "not a number"),  # int() reads other scripts' digits
        ("mqtt://h\n:1883", "U+000A"),  # urlsplit drops it silently
        ("mqtt://h\t", "U+0009"),
        ("mqtt://ho st:1", "U+0020"),
        ("mqtt://-h:1", "no valid host"),
        ("mqtt://h:1:2", "no valid host"),
        ("mqtt://" + "h" * 5000, "at most 2048 characters"),
        ("mqtt://" + "h" * 300, "(300 characters)"),
        ("mqtt://h?" + "x" * 300 + "=1", "(300 characters)"),
    ],
)
def test_a_url_that_names_no_broker_is_one_line(bad: str, said: str) -> None:
    with pytest.raises(BrokerURLError, match=re.escape(said)) as info:
        parse_broker_url(bad, env={})
    assert "\n" not in str(info.value) and len(str(info.value)) < 300


def test_ipv6_hosts_and_scope_ids_are_kept() -> None:
    url = parse_broker_url("mqtt://[::1]:1884", env={})
    assert (url.host, url.port, str(url)) == ("::1", 1884, "mqtt://[::1]:1884")
    assert parse_broker_url("mqtt://[fe80::1%eth0]", env={}).host == "fe80::1%eth0"


@pytest.mark.parametrize("kind", ["device", "fifo", "directory", "huge"])
def test_tls_files_are_regular_files_looked_at_unread(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "ca.pem"
    if kind == "device":
        path = Path("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        with path.open("wb") as f:
            f.truncate(MAX_TLS_FILE_BYTES + 1)
    with pytest.raises(BrokerURLError, match=f"ca={re.escape(str(path))}: "):
        parse_broker_url(f"mqtts://h?ca={path}", env={})


def test_credentials_longer_than_mqtt_carries_are_refused() -> None:
    with pytest.raises(BrokerURLError, match="user name is longer than MQTT allows"):
        parse_broker_url("mqtt://h", env={"ERRORFLOW_MQTT_USERNAME": "u" * 70_000})


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://[::1", "Invalid IPv6 URL"),
        ("ftp://h", "http:// or https://"),
        ("http://h:0", "1-65535"),
        ("http://h :1", "U+0020"),
        ("localhost:11434", "http:// or https://"),
    ],
)
def test_an_http_url_is_checked_as_a_broker_url_is(url: str, said: str) -> None:
    with pytest.raises(URLError, match=re.escape(said)):
        check_http_url(url)
    check_http_url("http://localhost:11434/v1")
    check_http_url("https://[::1]:8443")
