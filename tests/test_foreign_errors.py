"""Real client libraries' exceptions, classified by type and status (never by message).

The exceptions are the libraries' own, most of them raised by the libraries themselves
against a local aiohttp server, a closed port or a listener that never answers."""

from __future__ import annotations

import asyncio
import errno
import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator

import aiohttp
import httpx
import pytest
import requests
import yarl
from aiohttp import web
from aiohttp.test_utils import TestServer
from hypothesis import given
from hypothesis import strategies as st
from multidict import CIMultiDict, CIMultiDictProxy

from errorflow.core.taxonomy import ErrorCode, classify_http
from errorflow.policies.classify import classify_exception
from errorflow.policies.foreign_errors import ForeignError, classify_foreign, retry_after_seconds
from tests.conftest import free_port

URL = "http://svc.test/items/1"
STATUSES = [400, 401, 403, 404, 408, 422, 429, 500, 501, 502, 503, 504]


# -- exceptions the libraries build themselves ----------------------------------------
def httpx_status_error(status: int, headers: dict[str, str] | None = None) -> httpx.HTTPStatusError:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers=headers, text="upstream says no")

    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        response = client.get(URL)
    with pytest.raises(httpx.HTTPStatusError) as info:
        response.raise_for_status()
    return info.value


def httpx_raised(exc_type: type[httpx.TransportError]) -> httpx.TransportError:
    """What httpx raises when its transport fails this way."""

    def fail(request: httpx.Request) -> httpx.Response:
        raise exc_type("transport failed", request=request)

    with (
        httpx.Client(transport=httpx.MockTransport(fail)) as client,
        pytest.raises(exc_type) as info,
    ):
        client.get(URL)
    return info.value


def requests_status_error(status: int, headers: dict[str, str] | None = None) -> requests.HTTPError:
    response = requests.Response()
    response.status_code = status
    response.url = URL
    response.headers.update(headers or {})
    with pytest.raises(requests.HTTPError) as info:
        response.raise_for_status()
    return info.value


def aiohttp_status_error(
    status: int, headers: dict[str, str] | None = None
) -> aiohttp.ClientResponseError:
    info = aiohttp.RequestInfo(
        url=yarl.URL(URL),
        method="GET",
        headers=CIMultiDictProxy(CIMultiDict()),
        real_url=yarl.URL(URL),
    )
    return aiohttp.ClientResponseError(
        info, (), status=status, message="no", headers=CIMultiDict(headers or {})
    )


# -- what the issue asks for ----------------------------------------------------------
def test_httpx_503_is_transient() -> None:
    exc = httpx_status_error(503)
    assert classify_foreign(exc) == ForeignError(ErrorCode.TRANSIENT, 503)
    f = classify_exception("api", exc)
    assert (f.code, f.http_status, f.exc_type) == (ErrorCode.TRANSIENT, 503, "HTTPStatusError")
    assert f.raw.startswith("HTTPStatusError: Server error '503 Service Unavailable'")


def test_httpx_connect_timeout_is_timeout() -> None:
    exc = httpx_raised(httpx.ConnectTimeout)
    assert classify_foreign(exc) == ForeignError(ErrorCode.TIMEOUT)
    assert classify_exception("api", exc).code is ErrorCode.TIMEOUT


def test_429_with_retry_after_is_rate_limited_with_its_delay() -> None:
    for exc in (
        httpx_status_error(429, {"Retry-After": "7"}),
        requests_status_error(429, {"retry-after": "7"}),
        aiohttp_status_error(429, {"RETRY-AFTER": "7"}),
    ):
        assert classify_foreign(exc) == ForeignError(ErrorCode.RATE_LIMIT, 429, 7.0), exc
        f = classify_exception("api", exc)
        assert (f.code, f.http_status, f.retry_after_s) == (ErrorCode.RATE_LIMIT, 429, 7.0)


# -- statuses: the same map as errorflow's own tools, for every library ---------------
@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize(
    "make",
    [httpx_status_error, requests_status_error, aiohttp_status_error],
    ids=lambda m: m.__name__,
)
def test_status_decides_for_every_library(status: int, make: object) -> None:
    exc = make(status)  # type: ignore[operator]
    found = classify_foreign(exc)
    assert found is not None and found.http_status == status
    assert found.code is classify_http(status) and found.retry_after_s is None


@given(st.text(max_size=200), st.text(max_size=200))
def test_wording_never_matters(a: str, b: str) -> None:
    request = httpx.Request("GET", URL)
    response = httpx.Response(503, request=request)
    one = httpx.HTTPStatusError(a, request=request, response=response)
    two = httpx.HTTPStatusError(b, request=request, response=response)
    assert classify_foreign(one) == classify_foreign(two) == ForeignError(ErrorCode.TRANSIENT, 503)
    assert classify_foreign(httpx.ConnectError(a)) == classify_foreign(httpx.ConnectError(b))


def test_a_status_error_without_a_status_is_not_guessed() -> None:
    # requests lets one raise HTTPError by hand, without a response.
    assert classify_foreign(requests.HTTPError("503 Service Unavailable")) is None
    assert classify_exception("t", requests.HTTPError("503")).code is ErrorCode.INTERNAL_ERROR


# -- types: every class of the brief --------------------------------------------------
@pytest.mark.parametrize(
    ("exc_type", "code"),
    [
        (httpx.ConnectTimeout, ErrorCode.TIMEOUT),
        (httpx.ReadTimeout, ErrorCode.TIMEOUT),
        (httpx.WriteTimeout, ErrorCode.TIMEOUT),
        (httpx.PoolTimeout, ErrorCode.TIMEOUT),
        (httpx.ConnectError, ErrorCode.TRANSIENT),
        (httpx.ReadError, ErrorCode.TRANSIENT),
        (httpx.RemoteProtocolError, ErrorCode.TRANSIENT),
        (httpx.ProxyError, ErrorCode.TRANSIENT),
        (httpx.UnsupportedProtocol, None),  # a bad URL: no retry helps
        (httpx.LocalProtocolError, None),
    ],
)
def test_httpx_transport_errors(exc_type: type[httpx.TransportError], code: ErrorCode) -> None:
    found = classify_foreign(httpx_raised(exc_type))
    assert (found.code if found else None) is code


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (requests.Timeout("t"), ErrorCode.TIMEOUT),
        (requests.ConnectTimeout("t"), ErrorCode.TIMEOUT),  # also a ConnectionError
        (requests.ReadTimeout("t"), ErrorCode.TIMEOUT),
        (requests.ConnectionError("c"), ErrorCode.TRANSIENT),
        (requests.exceptions.ChunkedEncodingError("c"), ErrorCode.TRANSIENT),
        (requests.exceptions.InvalidURL("u"), None),
        (aiohttp.ServerTimeoutError("t"), ErrorCode.TIMEOUT),  # also a ClientConnectionError
        (aiohttp.ServerDisconnectedError(), ErrorCode.TRANSIENT),
        (aiohttp.ClientConnectionError("c"), ErrorCode.TRANSIENT),
        (aiohttp.ClientPayloadError("p"), ErrorCode.TRANSIENT),
        (aiohttp.InvalidURL("u"), None),
        (TimeoutError("permission denied"), ErrorCode.TIMEOUT),  # asyncio.TimeoutError too
        (ConnectionRefusedError("timeout"), ErrorCode.TRANSIENT),
        (BrokenPipeError(), ErrorCode.TRANSIENT),
        (socket.gaierror(-3, "Temporary failure in name resolution"), ErrorCode.TRANSIENT),
        (OSError(errno.ENETUNREACH, "Network is unreachable"), ErrorCode.TRANSIENT),
        (OSError(errno.EHOSTUNREACH, "No route to host"), ErrorCode.TRANSIENT),
        (OSError(errno.ENOSPC, "No space left on device"), None),
        (OSError("no errno"), None),
        (PermissionError("not found"), ErrorCode.PERMISSION_DENIED),
        (FileNotFoundError("denied"), ErrorCode.NOT_FOUND),
        (KeyError("sku"), ErrorCode.NOT_FOUND),
        (IndexError("row"), ErrorCode.NOT_FOUND),
        (LookupError("x"), ErrorCode.NOT_FOUND),
        # Decided: the arguments were validated before the tool ran, so these are the
        # tool's own (a bug, or a bad response body), not invalid_args.
        (ValueError("quantity must be positive"), None),
        (TypeError("unsupported operand"), None),
        (json.JSONDecodeError("Expecting value", "", 0), None),
        (RuntimeError("HTTP 503 timeout"), None),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_exception_type_decides(exc: BaseException, code: ErrorCode | None) -> None:
    found = classify_foreign(exc)
    assert (found.code if found else None) is code
    assert classify_exception("t", exc).code is (code or ErrorCode.INTERNAL_ERROR)


def test_aiohttp_client_connector_error_is_transient() -> None:
    key = aiohttp.client_reqrep.ConnectionKey("svc.test", 80, False, True, None, None, None)
    exc = aiohttp.ClientConnectorError(key, ConnectionRefusedError(errno.ECONNREFUSED, "refused"))
    assert classify_foreign(exc) == ForeignError(ErrorCode.TRANSIENT)


# -- an SDK's own error types and wrapped errors --------------------------------------
class SdkStatusError(Exception):
    def __init__(self, status_code: object) -> None:
        super().__init__("sdk says no")
        self.status_code = status_code


def test_an_sdk_error_with_a_status_code_attribute() -> None:
    assert classify_foreign(SdkStatusError(529)) == ForeignError(ErrorCode.TRANSIENT, 529)
    assert classify_foreign(SdkStatusError(403)) == ForeignError(ErrorCode.PERMISSION_DENIED, 403)
    for nonsense in (True, "503", 42, 700, None):
        assert classify_foreign(SdkStatusError(nonsense)) is None, nonsense


def test_an_explicit_cause_is_followed_and_an_implicit_context_is_not() -> None:
    class ToolFailed(Exception):
        pass

    cause = httpx_raised(httpx.ConnectTimeout)
    try:
        raise ToolFailed("lookup failed") from cause
    except ToolFailed as exc:
        wrapped = exc
    assert classify_foreign(wrapped) == ForeignError(ErrorCode.TIMEOUT)
    assert classify_exception("t", wrapped).exc_type == "ToolFailed"
    try:
        try:
            raise KeyError("k")
        except KeyError:
            raise ToolFailed("unrelated") from None
    except ToolFailed as exc:
        contextual = exc
    assert classify_foreign(contextual) is None


def test_a_cause_cycle_ends() -> None:
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__cause__, b.__cause__ = b, a
    assert classify_foreign(a) is None


# -- Retry-After ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "120"}, 120.0),
        ({"Retry-After": " 1.5 "}, 1.5),
        ({"Retry-After": "0"}, 0.0),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),  # a date needs a clock
        ({"Retry-After": "-1"}, None),
        ({"Retry-After": "nan"}, None),
        ({"Retry-After": "inf"}, None),
        ({"Retry-After": ""}, None),
        ({}, None),
        (None, None),
        ("not headers", None),
    ],
)
def test_retry_after_seconds(headers: object, seconds: float | None) -> None:
    assert retry_after_seconds(headers) == seconds
    if isinstance(headers, dict):
        assert retry_after_seconds(httpx.Headers(headers)) == seconds
        assert retry_after_seconds(CIMultiDict(headers)) == seconds


def test_retry_after_on_a_503() -> None:
    found = classify_foreign(httpx_status_error(503, {"Retry-After": "30"}))
    assert found == ForeignError(ErrorCode.TRANSIENT, 503, 30.0)


# -- end to end: the libraries against real sockets -----------------------------------
async def _status(request: web.Request) -> web.Response:
    status = int(request.match_info["code"])
    headers = {"Retry-After": "7"} if status == 429 else {}
    return web.Response(status=status, text="no", headers=headers)


@pytest.fixture
async def server() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/status/{code}", _status)
    srv = TestServer(app, host="127.0.0.1")
    await srv.start_server()
    try:
        yield str(srv.make_url("")).rstrip("/")
    finally:
        await srv.close()


@pytest.fixture
def silent() -> Iterator[str]:
    """A listener that accepts connections (the kernel does) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


def _requests_get(url: str, timeout: float = 5.0) -> None:
    requests.get(url, timeout=timeout).raise_for_status()


async def test_real_status_errors_from_every_library(server: str) -> None:
    caught: list[BaseException] = []
    async with httpx.AsyncClient() as client:
        try:
            (await client.get(f"{server}/status/429")).raise_for_status()
        except httpx.HTTPStatusError as exc:
            caught.append(exc)
    try:
        await asyncio.to_thread(_requests_get, f"{server}/status/429")
    except requests.HTTPError as exc:
        caught.append(exc)
    async with aiohttp.ClientSession(raise_for_status=True) as session:
        try:
            await session.get(f"{server}/status/429")
        except aiohttp.ClientResponseError as exc:
            caught.append(exc)
    assert [classify_foreign(e) for e in caught] == [
        ForeignError(ErrorCode.RATE_LIMIT, 429, 7.0)
    ] * 3
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.HTTPStatusError) as info:
            (await client.get(f"{server}/status/503")).raise_for_status()
    assert classify_foreign(info.value) == ForeignError(ErrorCode.TRANSIENT, 503)


async def test_a_closed_port_is_transient_for_every_library() -> None:
    url = f"http://127.0.0.1:{free_port()}/"
    caught: list[BaseException] = []
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.ConnectError) as hx:
            await client.get(url)
    caught.append(hx.value)
    with pytest.raises(requests.ConnectionError) as rq:
        await asyncio.to_thread(_requests_get, url)
    caught.append(rq.value)
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectorError) as ah:
            await session.get(url)
    caught.append(ah.value)
    assert [classify_foreign(e) for e in caught] == [ForeignError(ErrorCode.TRANSIENT)] * 3


async def test_a_server_that_never_answers_times_out_for_every_library(silent: str) -> None:
    caught: list[BaseException] = []
    async with httpx.AsyncClient(timeout=0.2) as client:
        with pytest.raises(httpx.ReadTimeout) as hx:
            await client.get(silent)
    caught.append(hx.value)
    with pytest.raises(requests.ReadTimeout) as rq:
        await asyncio.to_thread(_requests_get, silent, 0.2)
    caught.append(rq.value)
    timeout = aiohttp.ClientTimeout(sock_read=0.2)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        with pytest.raises(aiohttp.ServerTimeoutError) as ah:
            await session.get(silent)
    caught.append(ah.value)
    assert [classify_foreign(e) for e in caught] == [ForeignError(ErrorCode.TIMEOUT)] * 3


def test_the_classifier_imports_no_client_library() -> None:
    code = (
        "import sys, errorflow.policies.foreign_errors, errorflow.policies.classify; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('httpx', 'requests', 'aiohttp', 'asyncio', 'socket')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
