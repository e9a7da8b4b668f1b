"""Every published figure errorflow reproduces, beside ours: the README's experiment table.

Runs each bundled scenario that carries a `reference:` block with the command the README
gives it, reads our figure for each published cell from `--json`, and prints one
markdown row per figure: published, ours with its 95 % interval, whether they agree, and
the figure's basis:

- *calibrated*: the simulated profile's parameter was fitted to this same data (seed 000),
  so agreement is expected and is no evidence;
- *construction*: the figure follows from the scenario's settings (attempt counts, an
  oracle check), not from a behaviour of the model;
- *emergent*: the figure comes out of the mechanism (policies, topology, propagation)
  with parameters that were not fitted to it.

Agreement rules: a success count against a published count agrees when the Newcombe
interval of the difference (two independent samples) holds 0; a per-trial cost or an
amplification agrees when the interval of the difference holds 0, the published figure
taken as a 20-run mean with our spread (seed 000 ran 20 a cell); a drop or loss
agrees when the published percentage lies in the interval of ours (MOVER ratio
interval). Where they differ, the `why` column says which mechanism causes it; no
parameter is ever tuned to a published figure.

    python bench/experiment_table.py        (about 4 minutes on 2 cores)
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from readme_figures import errorflow

from errorflow.scoring.stats import Z95, newcombe_unpaired, wilson
from errorflow.scoring.sweep_measures import ratio_ci

Doc = dict[str, Any]

#: The commands the README's scenario table gives each reference scenario.
COMMANDS: dict[str, list[str]] = {
    "strategy-matrix": ["sweep", "strategy-matrix"],
    "message-rewrite": ["sweep", "message-rewrite"],
    "amplification": ["sweep", "amplification", "--trials", "200"],
    "resilience-topologies": ["sweep", "resilience-topologies", "--workers", "2"],
    "netsafe-topologies": ["sweep", "netsafe-topologies", "--workers", "2"],
}


@dataclass(frozen=True)
class Figure:
    ours: str
    interval: str
    agree: str  # "agree" / "differ" / "not comparable"


@dataclass(frozen=True)
class Row:
    scenario: str
    figure: str  # what is compared, in words
    published: str
    measure: Callable[[Doc], Figure]
    basis: str
    why: str = ""  # the mechanism behind a difference


def pct(x: float) -> str:
    return f"{x * 100:.0f} %"


def success(cell: str, published: str) -> Callable[[Doc], Figure]:
    """Our success count against a published `k/n` (or `k/n and k/n`, pooled)."""
    pairs = [part.strip().split("/") for part in published.split("and")]
    k2, n2 = sum(int(k) for k, _ in pairs), sum(int(n) for _, n in pairs)

    def measure(doc: Doc) -> Figure:
        c = doc["cells"][cell]
        k1, n1 = c["outcomes"]["success"], c["trials"] - c["outcomes"]["infra_fault"]
        low, high = wilson(k1, n1)
        d_low, d_high = newcombe_unpaired(k1, n1, k2, n2)
        agree = "agree" if d_low <= 0 <= d_high else "differ"
        return Figure(f"{k1}/{n1}", f"{pct(low)}–{pct(high)}", agree)

    return measure


#: Runs behind each seed-000 figure: a published mean is itself a 20-run mean.
PUBLISHED_RUNS = 20


def _mean_agrees(mean: float, ci: tuple[float, float], n: int, published: float) -> bool:
    """Whether our mean (over n trials, interval ci) and a published 20-run mean of the
    same quantity could be equal: the difference's interval, the published mean's spread
    taken as ours (a 20-run sample of the same distribution), holds 0."""
    se_ours = (ci[1] - ci[0]) / (2 * Z95)
    se_published = se_ours * math.sqrt(n / PUBLISHED_RUNS)
    half = Z95 * math.hypot(se_ours, se_published) + 0.005  # the published rounding
    return abs(mean - published) <= half


def per_trial(cell: str, key: str, published: float) -> Callable[[Doc], Figure]:
    """A mean cost per trial against a published 20-run mean."""

    def measure(doc: Doc) -> Figure:
        c = doc["cells"][cell]
        mean = c["metrics"]["per_trial"][key]
        low, high = c["metrics"]["per_trial_ci95"][key]
        agree = _mean_agrees(mean, (low, high), c["trials"], published)
        return Figure(f"{mean:.2f}", f"{low:.2f}–{high:.2f}", "agree" if agree else "differ")

    return measure


def amplification(cell: str, key: str, published: float) -> Callable[[Doc], Figure]:
    """Cost against the same scenario without faults; the interval is the cell's mean's,
    over the baseline's mean (the baseline's own spread is not in it)."""

    def measure(doc: Doc) -> Figure:
        c = doc["cells"][cell]
        base = c["baseline_per_trial"][key]
        low, high = (v / base for v in c["metrics"]["per_trial_ci95"][key])
        ours = c["amplification"][key]
        agree = _mean_agrees(ours, (low, high), c["trials"], published)
        return Figure(f"{ours:.2f}×", f"{low:.2f}–{high:.2f}×", "agree" if agree else "differ")

    return measure


def loss(cells: list[str], against: str, published_pct: float) -> Callable[[Doc], Figure]:
    """1 − success(cells, pooled) / success(against): a performance drop or loss."""

    def measure(doc: Doc) -> Figure:
        counts = [doc["cells"][c] for c in cells]
        k1 = sum(c["outcomes"]["success"] for c in counts)
        n1 = sum(c["trials"] for c in counts)
        base = doc["cells"][against]
        k0, n0 = base["outcomes"]["success"], base["trials"]
        ratio = (k1 / n1) / (k0 / n0)
        interval = ratio_ci(k1, n1, k0, n0)
        if interval is None:
            return Figure(pct(1 - ratio), "—", "differ")
        low, high = 1 - interval[1], 1 - interval[0]
        agree = "agree" if low <= published_pct / 100 <= high else "differ"
        return Figure(pct(1 - ratio), f"{pct(low)}–{pct(high)}", agree)

    return measure


def recovered(defence: str) -> Callable[[Doc], Figure]:
    """The range of the share of the drop a defence recovers, over the multi-agent cells
    with a drop to recover (a single agent has no one to check it)."""

    def measure(doc: Doc) -> Figure:
        shares = [
            m["recovered"]["value"]
            for label, m in doc["measures"]["cells"].items()
            if label.endswith(f"/{defence}") and not label.startswith("single/")
            and m["recovered"]["value"] is not None
        ]  # fmt: skip
        return Figure(f"{pct(min(shares))}–{pct(max(shares))}", "—", "not comparable")

    return measure


NETSAFE_GRAPHS = ("chain", "cycle", "tree", "star", "complete")


def most_exposed(graphs: tuple[str, ...], published: str) -> Callable[[Doc], Figure]:
    """Which graph loses most success with a faulty agent near the answer (ties named
    together); agrees when the published one is among them."""

    def measure(doc: Doc) -> Figure:
        lost = {
            g: doc["cells"][f"{g}/none"]["outcomes"]["success"]
            - doc["cells"][f"{g}/n2 (near)"]["outcomes"]["success"]
            for g in graphs
        }
        worst = max(lost.values())
        named = [g for g, v in lost.items() if v == worst]
        losses = ", ".join(f"{g} {v}" for g, v in lost.items())
        agree = "agree" if published in named else "differ"
        return Figure(" = ".join(named), f"successes lost: {losses}", agree)

    return measure


SEED_CALIBRATED = (
    "calibrated: small-local's p_self_retry_transient and p_repair_with_options are "
    "this table's own counts"
)
CONSTRUCTION_CALLS = "construction: the policy's attempt count (3) or 1"
CONSTRUCTION_MODEL = "construction: the agent's model turns"


def _strategy_rows() -> list[Row]:
    published = {
        "transient/blind-retry": ("20/20", 3, 2),
        "transient/tell-model": ("0/20", 1, 2),
        "transient/classify": ("20/20", 3, 2),
        "bad-args/blind-retry": ("0/20", 3, 2),
        "bad-args/tell-model": ("0/20", 1, 2),
        "bad-args/classify": ("0/20", 1, 2),
        "fatal/blind-retry": ("0/20", 3, 2),
        "fatal/tell-model": ("0/20", 1, 2),
        "fatal/classify": ("0/20", 1, 1),
    }
    rows: list[Row] = []
    for cell, (succ, backend, model) in published.items():
        rows += [
            Row("strategy-matrix", f"{cell}: success", succ, success(cell, succ),
                SEED_CALIBRATED),
            Row("strategy-matrix", f"{cell}: backend calls", str(backend),
                per_trial(cell, "backend_calls", backend), CONSTRUCTION_CALLS),
            Row("strategy-matrix", f"{cell}: model calls", str(model),
                per_trial(cell, "model_calls", model), CONSTRUCTION_MODEL),
        ]  # fmt: skip
    return rows


AMP_WHY = (
    "seed 000's model called again on its own once in 20 runs (1.02 model calls); "
    "small-local never does (p_self_retry_transient fitted to seed 000 §2's 0/20), so "
    "its model calls per trial are exactly the baseline's"
)


def _amplification_rows() -> list[Row]:
    published = {
        "blind-retry": ("19/20", 1.5, 1.0),
        "tell-model": ("15/20", 1.05, 1.02),
        "classify": ("20/20", 1.2, 1.0),
    }
    rows: list[Row] = []
    for cell, (succ, backend, model) in published.items():
        rows += [
            Row("amplification", f"{cell}: success", succ, success(cell, succ),
                "emergent", AMP_WHY),
            Row("amplification", f"{cell}: backend ×", f"{backend:.2f}×",
                amplification(cell, "backend_calls", backend), "emergent", AMP_WHY),
            Row("amplification", f"{cell}: model ×", f"{model:.2f}×",
                amplification(cell, "model_calls", model), "emergent", AMP_WHY),
        ]  # fmt: skip
    return rows


HUANG_WHY = (
    "ordering reversed (Huang: hierarchical most robust): our hierarchical leader "
    "aggregates its members' reports without checking them, and a flat group's peers "
    "each keep their own tool evidence (p_keep_own_evidence 0.8, assumed) and outvote "
    "the faulty one; Huang's leaders review their members' work and their peers have no "
    "evidence of their own (GPT-3.5 reasoning from memory)"
)
NETSAFE_WHY = (
    "our agents retrieve the fact with a tool and keep that evidence against the faulty "
    "peer (p_keep_own_evidence 0.8, assumed); NetSafe's agents answer knowledge and "
    "reasoning questions from memory, so the injected misinformation has nothing to "
    "outvote; for the same reason their complete graph is most exposed and ours safest"
)


def _topology_rows() -> list[Row]:
    rows: list[Row] = []
    for topo, published in (("linear", 23.7), ("flat", 10.5), ("hierarchical", 5.5)):
        cells = [f"{topo}/{rate}/none" for rate in ("0.2", "0.4", "0.6")]
        rows.append(
            Row("resilience-topologies", f"{topo}: drop, rates 0.2–0.6 pooled",
                f"{published} %", loss(cells, f"{topo}/0/none", published), "emergent",
                HUANG_WHY)
        )  # fmt: skip
    for defence in ("challenger", "inspector"):
        rows.append(
            Row("resilience-topologies", f"{defence}: share of the drop recovered",
                "up to 96.4 %", recovered(defence),
                "construction: the defence checks each claim against the system of record",
                "ours check every claim with a tool (an oracle); the paper's are LLM agents")
        )  # fmt: skip
    rows.append(
        Row("netsafe-topologies", "star, faulty hub: loss", "29.7 %",
            loss(["star/n2 (near)"], "star/none", 29.7), "emergent", NETSAFE_WHY)
    )  # fmt: skip
    rows.append(
        Row("netsafe-topologies", "the most exposed graph (near fault)", "complete",
            most_exposed(NETSAFE_GRAPHS, "complete"), "emergent", NETSAFE_WHY)
    )  # fmt: skip
    return rows


def _message_rows() -> list[Row]:
    return [
        Row("message-rewrite", f"{cell}: repaired", pub, success(cell, pub),
            "calibrated: p_repair_with_options (32/40) and p_repair_without_options (0/40) "
            "are seed 000 §3's counts")
        for cell, pub in (("raw", "0/20 and 0/20"), ("actionable", "17/20 and 15/20"))
    ]  # fmt: skip


def run_json(args: list[str], db: Path) -> Doc:
    doc: Doc = json.loads(errorflow(args, db, json_out=True))
    return doc


def main() -> None:
    rows = _strategy_rows() + _message_rows() + _amplification_rows() + _topology_rows()
    docs: dict[str, Doc] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in COMMANDS.items():
            print(f"running errorflow {' '.join(args)} ...", file=sys.stderr)
            docs[name] = run_json(args, Path(tmp) / "table.db")
    print("| experiment | figure | published | ours | 95 % CI | | basis | why they differ |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        fig = row.measure(docs[row.scenario])
        why = row.why if fig.agree != "agree" else ""
        print(
            f"| `{row.scenario}` | {row.figure} | {row.published} | {fig.ours} | "
            f"{fig.interval} | {fig.agree} | {row.basis} | {why} |"
        )


if __name__ == "__main__":
    main()
