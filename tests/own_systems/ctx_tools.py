"""Python tools with randomness of their own, made reproducible by a ToolContext."""

from __future__ import annotations

from errorflow import ToolContext


def flaky_price(sku: str, ctx: ToolContext) -> float:
    """The price of a SKU from a service that drops 30 % of its connections."""
    if ctx.random.random() < 0.3:
        raise ConnectionError(f"connection reset by peer (call {ctx.call} of trial {ctx.trial})")
    return {"SKU-1": 12.5, "SKU-2": 40.0}[sku]


def sampled(n: int, ctx) -> list[int]:  # type: ignore[no-untyped-def]
    """n numbers sampled from the context's stream (an unannotated `ctx`)."""
    return [ctx.random.randrange(100) for _ in range(n)]


def broken(sku: str, ctx: ToolContext) -> float:
    """A service that never answers."""
    raise RuntimeError(f"backend misconfigured for {sku}")
