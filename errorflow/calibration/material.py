"""What the probes talk about: small lookup tools and the facts behind them, from which
each probe draws (seeded) its subject, wording, values and option order. Neutral
business facts, so a model's answer depends on the situation, not the topic."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Fact:
    key: str  # the need key (claim key)
    identifier: str  # the value the tool takes
    wording: str  # how a task asks for it


@dataclass(frozen=True)
class Subject:
    tool: str
    arg: str
    description: str
    facts: tuple[Fact, ...]
    unit: str  # what a value is (for the prompt)


SUBJECTS: tuple[Subject, ...] = (
    Subject("get_metric", "name", "Look up one company metric by its metric name.", (
        Fact("revenue", "revenue_2024", "the company's revenue in 2024"),
        Fact("profit", "net_profit_2024", "the net profit for 2024"),
        Fact("headcount", "headcount_2024", "the number of employees at the end of 2024"),
        Fact("churn", "churn_rate_q3", "the customer churn rate in the third quarter"),
        Fact("backlog", "order_backlog", "the current order backlog"),
    ), "a number"),
    Subject("get_population", "city_id", "Population of one city, by city identifier.", (
        Fact("paris", "fr_paris", "the population of Paris"),
        Fact("lyon", "fr_lyon", "the population of Lyon"),
        Fact("berlin", "de_berlin", "the population of Berlin"),
        Fact("munich", "de_munich", "the population of Munich"),
        Fact("madrid", "es_madrid", "the population of Madrid"),
    ), "a number of inhabitants"),
    Subject("get_price", "sku", "Current list price of one product, by its SKU.", (
        Fact("kettle", "KT-1042", "the price of the blue electric kettle"),
        Fact("toaster", "TS-2210", "the price of the steel toaster"),
        Fact("blender", "BL-3307", "the price of the glass blender"),
        Fact("grinder", "GR-4415", "the price of the coffee grinder"),
        Fact("scale", "SC-5120", "the price of the kitchen scale"),
    ), "a price in euros"),
)  # fmt: skip

PROMPTS = (
    "Prepare a short brief for the weekly meeting.",
    "Answer the analyst's question with the facts below.",
    "Compile the figures for the quarterly note.",
    "A customer asked for the following; find it.",
)

#: Agent names a probe's conversation uses (a discussion's members).
MEMBERS = ("analyst_a", "analyst_b", "analyst_c")


@dataclass(frozen=True)
class Draw:
    """One probe's material: its subject, the fact it asks for, another fact of the
    same subject, the options in a seeded order, two distinct values, the prompt."""

    subject: Subject
    fact: Fact
    other: Fact
    options: tuple[str, ...]
    value: float
    other_value: float
    prompt: str


def draw(rng: random.Random) -> Draw:
    subject = rng.choice(SUBJECTS)
    fact, other = rng.sample(subject.facts, 2)
    options = [f.identifier for f in subject.facts]
    rng.shuffle(options)
    value = float(rng.randrange(100, 100_000))
    other_value = value + float(rng.randrange(1, 5_000))
    # A request number makes every probe's conversation its own: identical conversations
    # would get correlated answers (one at temperature 0), counting one answer many times.
    prompt = f"{rng.choice(PROMPTS)} (request {rng.randrange(10_000, 100_000)})"
    return Draw(subject, fact, other, tuple(options), value, other_value, prompt)


def mangled(identifier: str, rng: random.Random) -> str:
    """A near miss of an identifier (a typo a model's call may carry)."""
    i = rng.randrange(len(identifier))
    swap = "x" if identifier[i] != "x" else "z"
    return identifier[:i] + swap + identifier[i + 1 :]
