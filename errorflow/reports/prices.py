"""What model tokens cost: the prices a user gives (`--price MODEL=IN/OUT`, US dollars
per million input and output tokens) and what a count of tokens comes to.

No price is built in (list prices change, and a proxy or a contract may charge others):
a model without one has no cost, only counts, except a server on this machine (Ollama,
vLLM, llama.cpp), which costs nothing. A prompt cache's tokens are priced as Anthropic
prices its 5-minute cache: a read 0.1 × and a write 1.25 × an input token.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from errorflow.core.errors import InputError

CACHE_READ_FACTOR = 0.1
CACHE_WRITE_FACTOR = 1.25
PER = 1_000_000


class PriceError(InputError, ValueError):
    """A `--price` that does not read as MODEL=IN/OUT."""


@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float

    def cost(
        self,
        input_tokens: float,
        output_tokens: float,
        cache_read: float = 0,
        cache_write: float = 0,
    ) -> float:
        """US dollars for these tokens (`input_tokens` uncached)."""
        inp = input_tokens + cache_read * CACHE_READ_FACTOR + cache_write * CACHE_WRITE_FACTOR
        return (inp * self.input_per_mtok + output_tokens * self.output_per_mtok) / PER


FREE = Price(0.0, 0.0)


def parse_price(text: str) -> tuple[str, Price]:
    """`claude-haiku-4-5=1/5` → ("claude-haiku-4-5", Price(1, 5))."""
    model, sep, rates = text.partition("=")
    inp, slash, outp = rates.partition("/")
    if not sep or not slash or not model.strip():
        raise PriceError(f"expected MODEL=IN/OUT (USD per million tokens), found {text!r}")
    try:
        price = Price(float(inp), float(outp))
    except ValueError:
        raise PriceError(f"expected numbers in MODEL=IN/OUT, found {text!r}") from None
    if not (price.input_per_mtok >= 0 and price.output_per_mtok >= 0):
        raise PriceError(f"prices must be zero or more, found {text!r}")
    return model.strip(), price


def price_of(label: str, prices: Mapping[str, Price], local: bool = False) -> Price | None:
    """The price of a model by its label (`model @ server`): the price given for its
    name, else free when its server is on this machine, else unknown (None)."""
    model = label.split(" @ ", 1)[0]
    if model in prices:
        return prices[model]
    return FREE if local else None


def dollars(amount: float | None) -> str:
    if amount is None:
        return "–"
    return f"${amount:,.2f}" if amount >= 0.01 or amount == 0 else f"${amount:.4f}"
