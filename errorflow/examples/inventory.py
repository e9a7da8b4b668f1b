"""A warehouse inventory service, as a user's Python tool would wrap it.

It models the stock system behind an order-handling agent: a dozen SKUs held in two
warehouses (`north`, `south`), some of them discontinued. It fails the three ways
real tool code does, so a scenario can show each being classified at the tool edge:

- an unknown SKU raises `UnknownSku` (a LookupError, like a KeyError from a dict or a
  404 from a service) → `not_found`; its message names no valid SKU, so an agent
  learns the valid options only if errorflow's error style tells it;
- a discontinued SKU is a refusal in the result, `{"ok": False, "reason": ...}` →
  `business_rule` under the scenario's `business_failure:` rule;
- anything else answers `{"ok": True, ...}`.

Deterministic: the same arguments always give the same answer, so a trial's ground
truth can be the tool's own fault-free answer. No I/O, no clock.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

Warehouse = Literal["north", "south"]


@dataclass(frozen=True)
class Item:
    name: str
    north: int
    south: int
    unit_price_cents: int
    discontinued: bool = False


#: The built-in stock: SKU → item.
CATALOG: dict[str, Item] = {
    "SKU-1001": Item("steel bolt M8", 1200, 340, 15),
    "SKU-1002": Item("steel nut M8", 950, 0, 8),
    "SKU-1003": Item("washer 8 mm", 4000, 2750, 3),
    "SKU-2001": Item("hex key set", 42, 17, 1299),
    "SKU-2002": Item("torque wrench", 6, 11, 8950),
    "SKU-2003": Item("socket set 1/2in", 0, 9, 6400),
    "SKU-3001": Item("cable tie 200 mm", 10_000, 8_500, 2),
    "SKU-3002": Item("heat-shrink kit", 75, 60, 1450),
    "SKU-3003": Item("crimping tool", 3, 0, 3999, discontinued=True),
    "SKU-4001": Item("safety gloves L", 310, 220, 499),
    "SKU-4002": Item("safety glasses", 180, 145, 699),
    "SKU-4003": Item("ear defenders", 0, 0, 1899, discontinued=True),
}
#: Price breaks: at least this many units → this percentage off.
DISCOUNTS: tuple[tuple[int, int], ...] = ((1000, 15), (100, 10), (10, 5))


class UnknownSku(LookupError):
    """No such SKU in the catalogue (the message names none of the valid ones)."""


def _item(sku: str) -> Item:
    item = CATALOG.get(sku)
    if item is None:
        raise UnknownSku(f"unknown sku {sku!r}")
    return item


def stock_level(sku: str, warehouse: Warehouse) -> dict[str, object]:
    """Units of one SKU in stock at one warehouse (north or south)."""
    item = _item(sku)
    if item.discontinued:
        return {"ok": False, "reason": "sku discontinued"}
    units = item.north if warehouse == "north" else item.south
    return {"ok": True, "sku": sku, "warehouse": warehouse, "units": units}


async def price_quote(sku: str, quantity: int) -> dict[str, object]:
    """A price for `quantity` units of one SKU, volume discount applied (in cents)."""
    await asyncio.sleep(0)  # a real service would be awaited here
    item = _item(sku)
    if item.discontinued:
        return {"ok": False, "reason": "sku discontinued"}
    if quantity < 1:
        return {"ok": False, "reason": "quantity must be at least 1"}
    percent = next((p for least, p in DISCOUNTS if quantity >= least), 0)
    gross = item.unit_price_cents * quantity
    total = gross - gross * percent // 100
    return {
        "ok": True,
        "sku": sku,
        "quantity": quantity,
        "unit_price_cents": item.unit_price_cents,
        "discount_percent": percent,
        "total_cents": total,
    }
