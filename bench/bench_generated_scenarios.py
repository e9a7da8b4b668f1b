"""The invariants of tests/test_generated_scenarios.py on many more random scenarios:
fault-free with a flawless model every trial succeeds; a final answer that is whole and
true is never contaminated; explicit contaminates no more trials than implicit on the
same seeds; every injected fault that fired is in its trial's events; no breaker ends a
run half-open holding a probe that never got its verdict (tests/run_witness.py). Prints
how many scenarios, trials, fired faults and half-open probes were checked and every
violation.

    python bench/bench_generated_scenarios.py [--quick] [--scenarios N] [--seed S]
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _util import parse_args, quiet_logs
from hypothesis import HealthCheck, given, seed, settings, strategies

# tests/ by path: an installed package named `tests` (gmqtt ships one) would shadow it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from run_witness import witnessing
from scenario_generator import flawless, scenarios, whole_and_true_but_contaminated

from errorflow import api
from errorflow.scoring.score import Truth

counts: Counter[str] = Counter()
violations: list[str] = []


def check(data: dict[str, Any]) -> None:
    counts["scenarios"] += 1
    counts[f"topology {data['name'].removeprefix('gen-')}"] += 1
    clean = api.run(api.load(flawless(data)), propagation="explicit")
    counts["trials"] += data["trials"]
    if clean.outcomes["success"] != data["trials"]:
        violations.append(f"fault-free not all success {clean.outcomes}: {data}")
    faulty = api.load(data)
    truth = Truth(faulty)
    arms = {p: witnessed(faulty, p, data) for p in ("explicit", "implicit")}
    counts["trials"] += 2 * data["trials"]
    for p, result in arms.items():
        if whole_and_true_but_contaminated(result, truth):
            violations.append(f"{p}: a whole and true answer contaminated: {data}")
    ex, im = (arms[p].outcomes["contaminated"] for p in ("explicit", "implicit"))
    counts["contaminated explicit"] += ex
    counts["contaminated implicit"] += im
    if ex > im:
        violations.append(f"explicit {ex} > implicit {im} contaminated: {data}")
    if counts["scenarios"] % 50 == 0:
        print(f"  {counts['scenarios']} scenarios, {len(violations)} violations", flush=True)


def witnessed(scenario: Any, propagation: str, data: dict[str, Any]) -> api.Result:
    """One arm, with what its fault plans and breakers did checked against its events."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "runs.db"
        with witnessing() as seen:
            result = api.run(scenario, propagation=propagation, db=db)
        counts["faults fired"] += sum(seen.fired.values())
        counts["half-open probes"] += seen.probes
        for problem in seen.missing_faults(db, result.run_id) + seen.stuck_breakers():
            violations.append(f"{propagation}: {problem}: {data}")
    return result


def main() -> None:
    args = parse_args(
        __doc__,
        [
            ("--scenarios", {"type": int, "default": 2000}),
            ("--seed", {"type": int, "default": 0}),
        ],
    )
    quiet_logs()
    n = 100 if args.quick else args.scenarios
    started = time.perf_counter()
    runs = settings(
        max_examples=n,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    data = strategies.one_of(scenarios(), scenarios(faults=True))
    runs(seed(args.seed)(given(data)(check)))()
    elapsed = time.perf_counter() - started
    print(
        f"scenarios checked {counts['scenarios']}, trials {counts['trials']}, "
        f"violations {len(violations)} ({elapsed:.0f} s)"
    )
    for key, value in sorted(counts.items()):
        print(f"  {key}: {value}")
    for v in violations[:20]:
        print("VIOLATION", v[:2000])
    sys.exit(1 if violations else 0)


if __name__ == "__main__":
    main()
