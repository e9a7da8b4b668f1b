from pathlib import Path

import pytest

from errorflow.bus.url import BrokerURLError, parse_broker_url


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
