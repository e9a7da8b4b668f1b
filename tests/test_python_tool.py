"""Python tools: loading a callable, its argument schema, running one call, refusals."""

from __future__ import annotations

import asyncio
import datetime as dt
import enum
import threading
from pathlib import Path
from typing import Annotated, Any, Literal

import httpx
import pytest
from pydantic import Field, ValidationError

from errorflow.core.taxonomy import ErrorCode
from errorflow.examples import inventory
from errorflow.policies.classify import Failure, classify_body, classify_exception
from errorflow.scenario.spec.arg_schema import ArgSpec
from errorflow.scenario.spec.catalog import ToolArgs
from errorflow.world.python_tool import (
    BusinessFailure,
    PythonTool,
    PythonToolError,
    PythonToolTimeout,
    business_error,
    load_callable,
    signature_args_model,
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# -- loading --------------------------------------------------------------------------
def test_an_installed_module() -> None:
    assert load_callable("errorflow.examples.inventory:stock_level") is inventory.stock_level
    assert load_callable(" errorflow.examples.inventory:price_quote ") is inventory.price_quote
    assert load_callable("pathlib:Path.cwd") == Path.cwd  # a dotted attribute


def test_a_file_relative_to_base_dir(tmp_path: Path) -> None:
    write(tmp_path / "tools" / "lookup.py", "def find(key: str) -> str:\n    return key.upper()\n")
    fn = load_callable("tools/lookup.py:find", base_dir=tmp_path)
    assert fn("abc") == "ABC"
    # Cached per resolved path: the same module whichever way the path is written.
    assert load_callable(f"{tmp_path}/tools/../tools/lookup.py:find") is fn
    assert load_callable("./lookup.py:find", base_dir=tmp_path / "tools") is fn


def test_two_files_of_the_same_name_do_not_clash(tmp_path: Path) -> None:
    write(tmp_path / "a" / "tools.py", "def which() -> str:\n    return 'a'\n")
    write(tmp_path / "b" / "tools.py", "def which() -> str:\n    return 'b'\n")
    a = load_callable("a/tools.py:which", base_dir=tmp_path)
    b = load_callable("b/tools.py:which", base_dir=tmp_path)
    assert (a(), b()) == ("a", "b") and a.__module__ != b.__module__


def test_a_file_with_dataclasses_and_postponed_annotations(tmp_path: Path) -> None:
    write(
        tmp_path / "rec.py",
        "from __future__ import annotations\n"
        "from dataclasses import dataclass\n"
        "@dataclass\nclass Row:\n    id: str\n"
        "def get(id: str) -> Row:\n    return Row(id)\n",
    )
    fn = load_callable("rec.py:get", base_dir=tmp_path)
    assert fn("r1").id == "r1"  # type: ignore[attr-defined]
    model = signature_args_model(fn, "get")
    assert model.model_validate({"id": "x"}).id == "x"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("errorflow.examples.inventory", "must be 'package.module:function'"),
        ("errorflow.examples.inventory:", "must be 'package.module:function'"),
        (":stock_level", "must be 'package.module:function'"),
        ("errorflow.examples.inventory:stock-level", "must be 'package.module:function'"),
        ("my tools:run", "is neither a module name nor a .py file path"),
        ("no_such_module_xyz:run", "no module named 'no_such_module_xyz'"),
        ("errorflow.no_such_module:run", "no module named 'errorflow.no_such_module'"),
        ("errorflow.examples.inventory:nothing", "has no attribute 'nothing'"),
        ("errorflow.examples.inventory:Item.nothing", "'errorflow.examples.inventory.Item' has"),
        ("errorflow.examples.inventory:CATALOG", "is a dict, not a callable"),
        ("missing/tool.py:run", "no such file: "),
    ],
)
def test_clear_one_line_errors(tmp_path: Path, ref: str, message: str) -> None:
    with pytest.raises(PythonToolError, match=r".") as info:
        load_callable(ref, base_dir=tmp_path)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_module_that_fails_to_import(tmp_path: Path) -> None:
    write(tmp_path / "deps.py", "import no_such_dependency_xyz\ndef f() -> None: ...\n")
    write(tmp_path / "boom.py", "raise RuntimeError('config\\nmissing')\n")
    with pytest.raises(PythonToolError) as info:
        load_callable("deps.py:f", base_dir=tmp_path)
    assert "failed: ModuleNotFoundError: No module named 'no_such_dependency_xyz'" in str(
        info.value
    )
    with pytest.raises(PythonToolError) as info:
        load_callable("boom.py:f", base_dir=tmp_path)
    assert str(info.value).endswith("failed: RuntimeError: config missing")
    # A failed import leaves nothing cached: the fixed file loads.
    write(tmp_path / "boom.py", "def f() -> int:\n    return 1\n")
    assert load_callable("boom.py:f", base_dir=tmp_path)() == 1


# -- the argument schema from type hints ----------------------------------------------
class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def hinted(  # type: ignore[no-untyped-def]
    sku: str,
    warehouse: Literal["north", "south"],
    quantity: Annotated[int, Field(ge=1)] = 1,
    note: str | None = None,
    anything=None,  # no hint: Any
    since: dt.date | None = None,
    color: Color = Color.RED,
) -> dict[str, object]:
    return {}


def test_schema_from_hints() -> None:
    model = signature_args_model(hinted, "stock")
    assert issubclass(model, ToolArgs)
    ok = model.model_validate({"sku": "A", "warehouse": "north"})
    assert ok.quantity == 1 and ok.note is None  # type: ignore[attr-defined]
    schema = model.model_json_schema()
    assert schema["required"] == ["sku", "warehouse"]
    assert schema["properties"]["warehouse"]["enum"] == ["north", "south"]
    assert schema["properties"]["quantity"]["minimum"] == 1
    for bad in (
        {"sku": 1, "warehouse": "north"},  # strict: no int → str
        {"sku": "A", "warehouse": "east"},
        {"sku": "A", "warehouse": "north", "quantity": 0},
        {"sku": "A", "warehouse": "north", "quantity": "2"},
        {"sku": "A", "warehouse": "north", "quantity": True},
        {"sku": "A", "warehouse": "north", "extra": 1},  # extra forbidden
        {"warehouse": "north"},
    ):
        with pytest.raises(ValidationError):
            model.model_validate(bad)
    # No hint is Any; types JSON cannot carry exactly convert from what a model sends.
    v = model.model_validate(
        {"sku": "A", "warehouse": "south", "anything": [1], "since": "2024-05-01", "color": "blue"}
    )
    assert v.anything == [1] and v.since == dt.date(2024, 5, 1)  # type: ignore[attr-defined]
    assert v.color is Color.BLUE  # type: ignore[attr-defined]


def test_postponed_hints_are_resolved(tmp_path: Path) -> None:
    write(
        tmp_path / "t.py",
        "from __future__ import annotations\nfrom typing import Literal\n"
        "def f(n: int, mode: Literal['a', 'b'] = 'a') -> None: ...\n",
    )
    model = signature_args_model(load_callable("t.py:f", base_dir=tmp_path), "f")
    with pytest.raises(ValidationError):
        model.model_validate({"n": "1"})
    assert model.model_json_schema()["properties"]["mode"]["enum"] == ["a", "b"]


def _star(*items: str) -> None: ...
def _stars(**options: str) -> None: ...
def _positional(key: str, /) -> None: ...
def _unresolved(x: NoSuchType) -> None: ...  # type: ignore[name-defined]  # noqa: F821
def _unsupported(x: threading.Event) -> None: ...


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (_star, "takes *items"),
        (_stars, "takes **options"),
        (_positional, "'key' of _positional is positional-only"),
        (_unresolved, "the type hints of _unresolved do not resolve: NameError"),
        (_unsupported, "make no argument schema"),
    ],
)
def test_signatures_that_make_no_schema(fn: Any, message: str) -> None:
    with pytest.raises(PythonToolError) as info:
        signature_args_model(fn, "t")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_declared_args_take_precedence() -> None:
    declared = {
        "sku": ArgSpec(type="string", min_length=4),
        "warehouse": ArgSpec(type="string", enum=["north"]),
    }
    model = signature_args_model(inventory.stock_level, "stock", declared)
    with pytest.raises(ValidationError):
        model.model_validate({"sku": "SKU", "warehouse": "north"})  # shorter than declared
    with pytest.raises(ValidationError):
        model.model_validate({"sku": "SKU-1", "warehouse": "south"})  # hint allows, not decl.
    # **kwargs is fine when the args are declared.
    assert signature_args_model(_stars, "t", {"a": ArgSpec()}).model_validate({"a": "x"})


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ({"sku": ArgSpec(), "warehouse": ArgSpec(), "zone": ArgSpec()}, "'zone' is not a param"),
        ({"sku": ArgSpec()}, "requires 'warehouse', which the declared args lack"),
        ({"sku": ArgSpec(), "warehouse": ArgSpec(required=False)}, "declared optional"),
    ],
)
def test_declared_args_must_fit_the_callable(declared: dict[str, ArgSpec], message: str) -> None:
    with pytest.raises(PythonToolError, match=message):
        signature_args_model(inventory.stock_level, "stock", declared)


# -- running one call -----------------------------------------------------------------
async def test_a_sync_tool_runs_in_a_worker_thread() -> None:
    def where(tag: str) -> tuple[str, int]:
        return tag, threading.get_ident()

    tool = PythonTool(where, name="where")
    assert not tool.is_async
    result = await tool.call({"tag": "x"}, timeout_s=5)
    assert isinstance(result, tuple) and result[0] == "x"
    assert result[1] != threading.get_ident()


async def test_an_async_tool_is_awaited() -> None:
    tool = PythonTool.load("quote", "errorflow.examples.inventory:price_quote")
    assert tool.is_async and tool.name == "quote"
    assert tool.ref == "errorflow.examples.inventory:price_quote"
    assert tool.description.startswith("A price for `quantity` units")
    result = await tool.call({"sku": "SKU-1001", "quantity": 2}, timeout_s=5)
    assert isinstance(result, dict) and result["total_cents"] == 30


async def test_an_object_with_an_async_call_and_a_sync_wrapper_of_a_coroutine() -> None:
    class Client:
        async def __call__(self, n: int) -> int:
            return n + 1

    assert PythonTool(Client()).is_async
    assert await PythonTool(Client()).call({"n": 1}, timeout_s=5) == 2

    def wrapper(n: int) -> object:
        return Client()(n)  # returns a coroutine

    assert await PythonTool(wrapper).call({"n": 2}, timeout_s=5) == 3


async def test_a_validated_call_passes_only_what_was_set() -> None:
    def f(a: str, b: int = 7, c: str | None = "own default") -> tuple[str, int, str | None]:
        return a, b, c

    tool = PythonTool(f)
    args = tool.args_model.model_validate({"a": "x"})
    assert PythonTool.arguments(args) == {"a": "x"}
    assert await tool.call(args, timeout_s=5) == ("x", 7, "own default")


async def test_a_sync_tool_that_hangs_times_out() -> None:
    release = threading.Event()

    def hang() -> str:
        release.wait(10)  # bounded: the test releases it
        return "late"

    tool = PythonTool(hang, name="hang")
    try:
        with pytest.raises(PythonToolTimeout) as info:
            await tool.call({}, timeout_s=0.05)
    finally:
        release.set()
    assert isinstance(info.value, TimeoutError) and info.value.waited_s == 0.05
    f = classify_exception("hang", info.value)
    assert f.code is ErrorCode.TIMEOUT and f.raw == "TimeoutError: hang did not return within 0.05s"


async def test_an_async_tool_that_hangs_times_out_and_is_cancelled() -> None:
    cancelled = asyncio.Event()

    async def hang() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(PythonToolTimeout):
        await PythonTool(hang).call({}, timeout_s=0.05)
    assert cancelled.is_set()


async def test_the_tools_own_exceptions_pass_through_untouched() -> None:
    async def own_timeout() -> None:
        raise TimeoutError("the tool's own")

    def not_found(sku: str) -> None:
        raise KeyError(sku)

    with pytest.raises(TimeoutError) as info:
        await PythonTool(own_timeout).call({}, timeout_s=5)
    assert type(info.value) is TimeoutError  # not turned into the call's timeout
    with pytest.raises(KeyError):
        await PythonTool(not_found).call({"sku": "x"}, timeout_s=5)


async def test_outside_cancellation_is_not_a_timeout() -> None:
    started = asyncio.Event()

    async def slow() -> None:
        started.set()
        await asyncio.sleep(10)

    task = asyncio.create_task(PythonTool(slow).call({}, timeout_s=5))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# -- what the issue asks for: a real httpx tool, classified ---------------------------
def _client(answer: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(answer))


async def fetch_item(item: str, fail: Literal["503", "connect", "refuse", "none"]) -> object:
    """A user's tool: an httpx client against their service (a mock transport here)."""

    def answer(request: httpx.Request) -> httpx.Response:
        if fail == "connect":
            raise httpx.ConnectTimeout("connect timed out", request=request)
        if fail == "503":
            return httpx.Response(503)
        body = {"ok": False, "reason": "item archived"} if fail == "refuse" else {"ok": True}
        return httpx.Response(200, json=body)

    async with _client(answer) as client:
        response = await client.get(f"http://inventory.test/items/{item}")
        response.raise_for_status()
        return response.json()


@pytest.mark.parametrize(
    ("fail", "code"),
    [
        ("503", ErrorCode.TRANSIENT),
        ("connect", ErrorCode.TIMEOUT),
        ("refuse", ErrorCode.BUSINESS_RULE),
        ("none", None),
    ],
)
async def test_a_python_tool_over_httpx_is_classified(fail: str, code: ErrorCode | None) -> None:
    tool = PythonTool(fetch_item, name="items")
    args = tool.args_model.model_validate({"item": "i1", "fail": fail})
    rule = BusinessFailure()
    failure: Failure | None
    try:
        result = await tool.call(args, timeout_s=5)
    except Exception as exc:
        failure = classify_exception(tool.name, exc)
    else:
        failure = classify_body(
            tool.name, business_error=business_error(rule, result), empty=False, item_errors={}
        )
    assert (failure.code if failure else None) is code
    if code is ErrorCode.BUSINESS_RULE:
        assert failure is not None and failure.reason == "item archived"


# -- refusals in the result -----------------------------------------------------------
@pytest.mark.parametrize(
    ("rule", "result", "reason"),
    [
        (BusinessFailure(), {"ok": False, "reason": "x"}, "x"),
        (BusinessFailure(), {"ok": False}, "ok is false"),
        (BusinessFailure(), {"ok": False, "reason": "  "}, "ok is false"),
        (BusinessFailure(), {"ok": False, "reason": 42}, "42"),
        (BusinessFailure(), {"ok": True, "reason": "x"}, None),
        (BusinessFailure(), {"ok": 0, "reason": "x"}, None),  # JSON 0 is not false
        (BusinessFailure(), {"reason": "x"}, None),
        (BusinessFailure(), [{"ok": False}], None),
        (BusinessFailure(), "ok: false", None),
        (BusinessFailure(), None, None),
        (
            BusinessFailure(field="status", equals="rejected", reason_field="why"),
            {"status": "rejected", "why": "over quota"},
            "over quota",
        ),
        (BusinessFailure(field="status", equals="rejected"), {"status": "ok"}, None),
        (BusinessFailure(field="code", equals=1, reason_field=None), {"code": 1}, "code is 1"),
        (BusinessFailure(field="code", equals=1), {"code": True}, None),  # true is not 1
        (BusinessFailure(field="code", equals=1), {"code": 1.0}, "code is 1"),
        (BusinessFailure(field="error", equals=None), {"error": None}, "error is null"),
        (BusinessFailure(field="s", equals="no"), {"s": "no"}, "s is 'no'"),
    ],
)
def test_business_error(rule: BusinessFailure, result: object, reason: str | None) -> None:
    assert business_error(rule, result) == reason


def test_a_tool_file_is_found_next_to_the_scenario_from_any_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from errorflow.scenario.loader import load

    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "my_tools.py").write_text("def double(n: int) -> int:\n    return 2 * n\n")
    (folder / "s.yaml").write_text(
        "name: rel\n"
        "tools:\n  dbl: {kind: python, function: 'my_tools.py:double'}\n"
        "agents:\n  a: {role: researcher, tools: [dbl]}\n"
        "task:\n  prompt: p\n  needs: [{id: n, tool: dbl, wording: n, args: {n: 2}}]\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    scenario = load(folder / "s.yaml")
    assert scenario.tools["dbl"].function == f"{(folder / 'my_tools.py').resolve()}:double"
    broken = (folder / "s.yaml").read_text().replace("my_tools.py", "missing.py")
    (folder / "broken.yaml").write_text(broken)
    with pytest.raises(Exception, match=r"broken.yaml:3:.*missing.py"):
        load(folder / "broken.yaml")
