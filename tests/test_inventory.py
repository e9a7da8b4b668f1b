"""The Python tool shipped for a bundled scenario: a warehouse inventory service."""

from __future__ import annotations

import ast
import inspect

import pytest
from pydantic import ValidationError

from errorflow.core.taxonomy import ErrorCode
from errorflow.examples import inventory
from errorflow.examples.inventory import (
    CATALOG,
    UnknownSku,
    price_quote,
    stock_level,
)
from errorflow.policies.classify import classify_exception
from errorflow.world.python_tool import BusinessFailure, PythonTool, business_error


def test_a_dozen_skus_some_discontinued() -> None:
    assert len(CATALOG) == 12
    assert sum(item.discontinued for item in CATALOG.values()) == 2


@pytest.mark.parametrize(
    ("sku", "warehouse", "units"),
    [("SKU-1001", "north", 1200), ("SKU-1001", "south", 340), ("SKU-1002", "south", 0)],
)
def test_stock_level(sku: str, warehouse: str, units: int) -> None:
    expected = {"ok": True, "sku": sku, "warehouse": warehouse, "units": units}
    assert stock_level(sku, warehouse) == expected  # type: ignore[arg-type]
    assert stock_level(sku, warehouse) == expected  # type: ignore[arg-type]  # deterministic


def test_a_discontinued_sku_is_a_refusal() -> None:
    result = stock_level("SKU-3003", "north")
    assert result == {"ok": False, "reason": "sku discontinued"}
    assert business_error(BusinessFailure(), result) == "sku discontinued"


def test_an_unknown_sku_names_no_valid_one() -> None:
    with pytest.raises(UnknownSku) as info:
        stock_level("SKU-9999", "north")
    assert isinstance(info.value, LookupError)
    assert not any(sku in str(info.value) for sku in CATALOG)
    assert classify_exception("stock", info.value).code is ErrorCode.NOT_FOUND


@pytest.mark.parametrize(
    ("quantity", "percent", "total"),
    [(1, 0, 1299), (9, 0, 11691), (10, 5, 12341), (100, 10, 116910), (1000, 15, 1104150)],
)
async def test_price_quote_applies_volume_discounts(
    quantity: int, percent: int, total: int
) -> None:
    quote = await price_quote("SKU-2001", quantity)
    assert quote == {
        "ok": True,
        "sku": "SKU-2001",
        "quantity": quantity,
        "unit_price_cents": 1299,
        "discount_percent": percent,
        "total_cents": total,
    }


async def test_price_quote_refuses_and_fails_like_stock_level() -> None:
    assert await price_quote("SKU-4003", 5) == {"ok": False, "reason": "sku discontinued"}
    assert await price_quote("SKU-1001", 0) == {
        "ok": False,
        "reason": "quantity must be at least 1",
    }
    with pytest.raises(UnknownSku):
        await price_quote("nope", 1)


async def test_as_a_python_tool_from_its_reference() -> None:
    stock = PythonTool.load("stock", "errorflow.examples.inventory:stock_level")
    schema = stock.args_model.model_json_schema()
    assert schema["required"] == ["sku", "warehouse"]
    assert schema["properties"]["warehouse"]["enum"] == ["north", "south"]
    with pytest.raises(ValidationError):
        stock.args_model.model_validate({"sku": "SKU-1001", "warehouse": "east"})
    args = stock.args_model.model_validate({"sku": "SKU-2002", "warehouse": "south"})
    assert await stock.call(args, timeout_s=5) == {
        "ok": True,
        "sku": "SKU-2002",
        "warehouse": "south",
        "units": 11,
    }
    quote = PythonTool.load("quote", "errorflow.examples.inventory:price_quote")
    assert quote.is_async and quote.description.startswith("A price for")


def test_imports_nothing_of_errorflow() -> None:
    """It stands for the user's own code, which knows nothing of the simulator."""
    tree = ast.parse(inspect.getsource(inventory))
    imported = [
        alias.name if isinstance(node, ast.Import) else (node.module or "")
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    assert imported and not [m for m in imported if m.startswith("errorflow")]
