"""Rich tables for the terminal: one run, a paired comparison, a sweep matrix.

Bus faults and infra faults get a row only when they happened; infra-fault trials are
counted and never rated (the rates are over the trials that measured something).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Literal

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from errorflow.core.display import for_terminal, signed_pct
from errorflow.reports.policy_table import policy_table
from errorflow.reports.service_table import service_table
from errorflow.runtime.experiment import ArmJson, RefCell, SweepJson
from errorflow.scoring.stats import p_value_text
from errorflow.scoring.summary import (
    PairedOutcomes,
    PerTrialCosts,
    Rate,
    RunJson,
    bus_fault_line,
    bus_recovery_line,
)

#: Outcomes shown only when some trial had them.
SHOWN_WHEN_PRESENT = ("bus_fault", "infra_fault")

#: The outcome that is counted but has no rate (errorflow's infrastructure failed).
INFRA_FAULT = "infra_fault"
BUS_FAULT = "bus_fault"

#: What the rate columns say for infra-fault trials.
NOT_SCORED = "not scored"


def shown(text: object) -> str:
    """A string from outside (a label, a name, an id) as Rich markup that prints it as
    it is: control characters made visible, `[` not a tag. Rich parses markup in every
    plain `str` it prints, table cells and titles included."""
    return escape(for_terminal(str(text)))


def infra_faults(data: RunJson) -> int:
    return data["outcomes"].get(INFRA_FAULT, 0)


def measured_trials(data: RunJson) -> int:
    """The trials a rate is over: those scored, without the infra faults."""
    return sum(data["outcomes"].values()) - infra_faults(data)


def costed_trials(data: RunJson) -> int:
    """The trials whose results arrived: what costs (and policy decisions) are over."""
    return measured_trials(data) - data["outcomes"].get(BUS_FAULT, 0)


def policy_title(data: RunJson, label: str | None = None) -> str:
    """`Policy decisions (explicit)`, saying the trials it sums over when infra or bus
    faults left some out (their decisions went with results that never arrived)."""
    where = [label] if label else []
    if data["outcomes"].get(BUS_FAULT, 0):
        arrived = costed_trials(data)
        where.append(f"over the {arrived} trials whose results arrived, of {data['trials']}")
    elif infra_faults(data):
        where.append(f"over the {measured_trials(data)} measured trials of {data['trials']}")
    return "Policy decisions" + (f" ({', '.join(where)})" if where else "")


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def ci(rate: Rate) -> str:
    if rate["ci95"] is None:
        return "no trial measured"
    low, high = rate["ci95"]
    return f"{low:.0%}–{high:.0%}"


def outcome_table(data: RunJson, title: str = "Outcomes") -> Table:
    table = Table(title=title, title_justify="left")
    for col, just in (
        ("outcome", "left"),
        ("trials", "right"),
        ("rate", "right"),
        ("95% CI", "right"),
    ):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    rates = data["metrics"]["rates"]
    unrated = not measured_trials(data)  # no trial measured anything: no rate to give
    for outcome, count in data["outcomes"].items():
        if count == 0 and outcome in SHOWN_WHEN_PRESENT:
            continue
        rate = rates.get(outcome)
        if unrated and rate is not None:
            table.add_row(shown(outcome), str(count), "n/a", "no trial measured")
        elif rate is None:  # counted, never rated
            table.add_row(shown(outcome), str(count), "–", NOT_SCORED)
        else:
            table.add_row(shown(outcome), str(count), pct(rate["rate"]), ci(rate))
    return table


def infra_line(data: RunJson) -> str | None:
    """What a run with infra-fault trials must say next to its rates (None: none)."""
    n = infra_faults(data)
    if not n:
        return None
    return (
        f"infrastructure faults: {n} of {data['trials']} trials measured nothing (a model "
        f"server, a tool's server or an agent's process failed); they are not scored and "
        f"every rate is over the other "
        f"{measured_trials(data)}"
    )


def cost_line(data: RunJson) -> str:
    """`per trial (95% CI): backend calls 1.95 (1.60–2.30), ...`: means over the trials
    that delivered their messages, with their bootstrap intervals when known."""
    per = data["metrics"]["per_trial"]
    ci = data["metrics"].get("per_trial_ci95", {})
    if not costed_trials(data):
        return "per trial: costs n/a (they are counted from results, and no trial's arrived)"

    def shown(key: str, mean: float, digits: int, unit: str = "") -> str:
        text = f"{mean:.{digits}f}{unit}"
        low, high = (f"{x:.{digits}f}" for x in ci.get(key, (mean, mean)))
        return text if low == high else f"{text} ({low}–{high})"  # no spread: no interval

    tokens = per["input_tokens"] + per["output_tokens"]
    line = (
        f"per trial{' (95% CI)' if ci else ''}: "
        f"backend calls {shown('backend_calls', per['backend_calls'], 2)}, "
        f"model calls {shown('model_calls', per['model_calls'], 2)}, "
        f"tokens {shown('tokens', tokens, 0)}, retries {shown('retries', per['retries'], 2)}, "
        f"simulated time {shown('sim_seconds', per['sim_seconds'], 2, 's')}"
    )
    amp = data.get("amplification")
    if amp and (amp["backend_calls"] is not None or amp["model_calls"] is not None):
        line += (
            f"\namplification vs fault-free baseline: backend {_times(amp['backend_calls'])}, "
            f"model {_times(amp['model_calls'])}"
        )
    return line


def _times(ratio: float | None) -> str:
    """`1.50×`, or `–` where the baseline made no such calls (no ratio)."""
    return "–" if ratio is None else f"{ratio:.2f}×"


def print_fault_lines(console: Console, data: RunJson, arm: str | None = None) -> None:
    """Which injected faults fired (and in how many trials they never did), how bus
    faults were recovered, and the trials infrastructure faults left unmeasured; each
    line prefixed with the arm's name in a paired run."""
    lines: list[tuple[str, str]] = []
    bus_faults = data.get("bus_faults")
    if bus_faults:
        lines.append((bus_fault_line(bus_faults), ""))
    recovery = data.get("bus_recovery")
    if recovery:
        lines.append((bus_recovery_line(recovery), ""))
    agent_faults = data.get("agent_faults")
    if agent_faults:
        lines.append((bus_fault_line(agent_faults, "agent faults", "messages"), ""))
    tool_faults = data.get("tool_faults")
    if tool_faults:
        lines.append((bus_fault_line(tool_faults, "tool faults", "calls"), ""))
    model_faults = data.get("model_faults")
    if model_faults:
        lines.append((bus_fault_line(model_faults, "model faults", "attempts"), ""))
    lines += [(text, "") for text in credit_lines(data)]
    infra = infra_line(data)
    if infra is not None:
        lines.append((infra, "bold red"))
    for text, style in lines:
        shown_text = Text(f"{arm}: {text}" if arm else text, style=style)
        console.print(shown_text, highlight=False)


#: Facts named on the partial-credit line before the rest are only counted.
CREDIT_SHOWN = 8


def credit_lines(data: RunJson) -> list[str]:
    """`recovered: 3 of 14 successes ...` (when a struck trial succeeded) and the facts
    not right in every trial, `per fact, right/wrong/abstained of 40 trials: rate 34/6/0`
    (errorflow.scoring.credit)."""
    m = data["metrics"]
    out: list[str] = []
    recovered, successes = m.get("recovered", 0), data["outcomes"].get("success", 0)
    if recovered:
        out.append(
            f"recovered: {recovered} of {successes} successes had a fault strike them "
            "(a reported failure or a fired tool fault) and answered every need right"
        )
    credit = m.get("credit") or {}
    missed = {k: c for k, c in credit.items() if c["wrong"] or c["abstained"]}
    if missed:
        n = sum(next(iter(credit.values())).values())
        cells = [f"{k} {c['right']}/{c['wrong']}/{c['abstained']}" for k, c in missed.items()]
        more = len(cells) - CREDIT_SHOWN
        shown_cells = ", ".join(cells[:CREDIT_SHOWN]) + (f" and {more} more" if more > 0 else "")
        rest = len(credit) - len(missed)
        tail = f"; {rest} other(s) right in every trial" if rest else ""
        out.append(f"per fact, right/wrong/abstained of {n} trials: {shown_cells}{tail}")
    return out


def baseline_line(outcomes: Mapping[str, int], arm: str | None = None) -> str:
    """`fault-free baseline: success 20, contained 0, contaminated 0 of 20` (the trials a
    run measured without any injected fault: what its faults cost)."""
    always = ("success", "contained", "contaminated")
    shown_ = {k: v for k, v in outcomes.items() if k in always or v}
    cells = ", ".join(f"{k} {v}" for k, v in shown_.items())
    head = f"{arm}: " if arm else ""
    return f"{head}fault-free baseline: {cells} of {sum(outcomes.values())}"


def print_run(console: Console, data: RunJson, wall: float | None = None) -> None:
    console.print(
        f"[bold]{shown(data['scenario'])}[/]  run {shown(data['run_id'])}  "
        f"seed {data['seed']}  trials {data['trials']}  "
        f"propagation {shown(data['propagation'])}"
    )
    console.print(f"broker: {shown(data['broker'])}", highlight=False)
    console.print(outcome_table(data))
    policy = data["metrics"].get("policy")
    if policy:
        console.print(policy_table(policy, policy_title(data)))
    services = data.get("services")
    if services:
        console.print(service_table(services))
    print_fault_lines(console, data)
    baseline = data.get("baseline_outcomes")
    if isinstance(baseline, dict):
        console.print(Text(baseline_line(baseline)), highlight=False)
    console.print(cost_line(data), highlight=False)
    m = data["metrics"]
    if m["max_depth"]:
        console.print(f"contamination depth: mean {m['mean_depth']:.2f}, max {m['max_depth']} hops")
    if data["rejects"]:
        console.print(f"rejected messages: {shown(data['rejects'])}")
    if wall is not None:
        console.print(f"wall time {wall:.2f}s")


def paired_table(arms: dict[str, ArmJson], paired: PairedOutcomes) -> Group:
    names = list(arms)
    table = Table(title="Paired arms (same seeds, same faults)", title_justify="left")
    table.add_column("")
    for name in names:
        table.add_column(shown(name), justify="right")
    for outcome in ("success", "contained", "contaminated", *SHOWN_WHEN_PRESENT):
        if outcome in SHOWN_WHEN_PRESENT and not any(
            a["outcomes"].get(outcome, 0) for a in arms.values()
        ):
            continue
        table.add_row(shown(outcome), *(_arm_cell(a, outcome) for a in arms.values()))
    for key, label in (
        ("backend_calls", "backend calls/trial"),
        ("model_calls", "model calls/trial"),
    ):
        table.add_row(label, *(_per_trial(a, key) for a in arms.values()))
    table.add_row("mean depth", *(f"{a['metrics']['mean_depth']:.2f}" for a in arms.values()))
    lines = []
    for metric, d in paired.items():
        lines.append(
            Text(
                f"{for_terminal(metric)}: {for_terminal(names[0])} − "
                f"{for_terminal(names[1])} = {signed_pct(d['diff'])} "
                f"(95% CI {signed_pct(d['low'])} to {signed_pct(d['high'])}; discordant trials "
                f"{d['only_a']} vs {d['only_b']} of {d['n']}; {p_value_text(d.get('p'))})"
            )
        )
    return Group(table, *lines)


def _per_trial(arm: ArmJson, key: str) -> str:
    return f"{arm['metrics']['per_trial'][key]:.2f}" if costed_trials(arm) else "n/a"


def _arm_cell(arm: ArmJson, outcome: str) -> str:
    count = arm["outcomes"].get(outcome, 0)
    rate = arm["metrics"]["rates"].get(outcome)
    if rate is None:
        return f"{count} ({NOT_SCORED})" if count else "0"
    if not measured_trials(arm):
        return f"{count} (n/a)"
    return f"{count} ({pct(rate['rate'])}, {ci(rate)})"


def sweep_tables(data: SweepJson) -> Group:
    """A matrix per metric for two axes; one table with a row per cell for one or three
    (a column per axis)."""
    axes = data["axes"]
    cells = data["cells"]
    reference = data["reference"]
    ref = reference["cells"] if reference else {}
    metrics: list[tuple[str, Callable[[ArmJson], str]]] = [
        ("success", lambda c: f"{c['outcomes']['success']}/{measured_trials(c)}"),
        ("contam.", lambda c: f"{c['outcomes']['contaminated']}/{measured_trials(c)}"),
        ("calls b/m", lambda c: _calls(c["metrics"]["per_trial"])),
        ("ampl. b×/m×", lambda c: f"{_amp(c, 'backend_calls')}/{_amp(c, 'model_calls')}"),
    ]
    parts: list[RenderableType] = []
    if len(axes) != 2:
        title = f"{shown(data['scenario'])}: {' × '.join(shown(a['name']) for a in axes)}"
        table = Table(title=title, title_justify="left")
        for axis in axes:
            table.add_column(shown(axis["name"]))
        for name, _ in metrics:
            table.add_column(name, justify="right")
        for combo in itertools.product(*(a["values"] for a in axes)):
            label = "/".join(combo)
            table.add_row(*(shown(v) for v in combo), *(fn(cells[label]) for _, fn in metrics))
            published = _ref_row(ref[label]) if label in ref else []
            if any(published[1:]):  # a reference cell with other figures only: no row
                row = [published[0], *[""] * (len(axes) - 1), *published[1:]]
                table.add_row(*(Text(for_terminal(x), "dim") for x in row))
        parts.append(table)
        parts.append(
            Text(
                "calls b/m: backend and model calls per trial; ampl.: against the "
                "fault-free baseline",
                style="dim",
            )
        )
    else:
        rows, cols = axes[0], axes[1]
        views: list[tuple[str, Callable[[ArmJson], str], str | None]] = [
            ("success", metrics[0][1], "success"),
            ("contaminated", metrics[1][1], None),
            ("backend/model calls per trial", metrics[2][1], "calls"),
        ]
        for title, fn, ref_key in views:
            table = Table(title=f"{shown(data['scenario'])}: {title}", title_justify="left")
            table.add_column(f"{shown(rows['name'])} \\ {shown(cols['name'])}")
            for c in cols["values"]:
                table.add_column(shown(c), justify="right")
            for r in rows["values"]:
                table.add_row(shown(r), *(fn(cells[f"{r}/{c}"]) for c in cols["values"]))
                published = [_ref_value(ref.get(f"{r}/{c}"), ref_key or "") for c in cols["values"]]
                if ref_key and any(published):  # no row of blanks (cells with other figures)
                    table.add_row(
                        Text("  published", style="dim"),
                        *(Text(for_terminal(p), "dim") for p in published),
                    )
            parts.append(table)
    if reference and ref:
        parts.append(Text(f"published: {for_terminal(reference['source'])}", style="dim"))
    faulty = {label: infra_faults(c) for label, c in cells.items() if infra_faults(c)}
    if faulty:
        listed = ", ".join(f"{for_terminal(label)} {n}" for label, n in faulty.items())
        parts.append(
            Text(f"infrastructure faults (not scored, out of the counts): {listed}", "bold red")
        )
    return Group(*parts)


def _amp(c: ArmJson, key: Literal["backend_calls", "model_calls"]) -> str:
    amp = c.get("amplification")
    value = amp[key] if amp else None
    return "–" if value is None else f"{value:.2f}"


def _calls(per: PerTrialCosts) -> str:
    return f"{per['backend_calls']:.2f}/{per['model_calls']:.2f}"


def _ref_value(cell: RefCell | None, key: str) -> str:
    if not cell:
        return ""
    if key == "calls":
        return f"{cell['backend_calls']}/{cell['model_calls']}" if "backend_calls" in cell else ""
    return str(cell.get(key, ""))


def _ref_row(cell: RefCell) -> list[str]:
    calls = amp = ""
    if "backend_calls" in cell:
        calls = f"{cell['backend_calls']}/{cell.get('model_calls', '?')}"
    if "backend_amplification" in cell:
        amp = f"{cell['backend_amplification']}/{cell.get('model_amplification', '?')}"
    return ["  published", str(cell.get("success", "")), "", calls, amp]
