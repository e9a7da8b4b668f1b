#!/usr/bin/env bash
# Same seeds, same outcomes: run every bundled scenario and sweep into one store and write
# a fingerprint of their outcomes (no timings, ids or ports) to OUT/fingerprint.txt.
# Run it on two commits and diff the fingerprints:
#   bash bench/capture_outcomes.sh /tmp/a   # on one commit
#   bash bench/capture_outcomes.sh /tmp/b   # on another
#   diff /tmp/a/fingerprint.txt /tmp/b/fingerprint.txt
set -euo pipefail
out=$1
mkdir -p "$out"
db=$out/db.sqlite
rm -f "$db"
for s in contamination partial-success support-pipeline analytics-pipeline order-desk; do
  errorflow run "$s" --propagation both --json -q --db "$db" > "$out/run-$s.json"
done
for s in outage retry-storm runaway-loop; do
  errorflow run "$s" --json -q --db "$db" > "$out/run1-$s.json"
done
for s in contamination partial-success message-rewrite amplification strategy-matrix topologies; do
  errorflow run "$s" --json -q --db "$db" > "$out/run1-$s.json"
done
for s in strategy-matrix message-rewrite amplification topologies; do
  errorflow sweep "$s" --json -q --db "$db" > "$out/sweep-$s.json"
done
errorflow run contamination --baseline --json -q --db "$db" > "$out/run-baseline.json"
# Every other bundled scenario, both arms (the tree's own list: one added later adds its
# own lines, and only those).
listed=" contamination partial-success support-pipeline analytics-pipeline order-desk outage retry-storm runaway-loop message-rewrite amplification strategy-matrix topologies "
for s in $(errorflow scenarios --json | python -c 'import json, sys; print(" ".join(d["name"] for d in json.load(sys.stdin)))'); do
  case "$listed" in *" $s "*) continue ;; esac
  errorflow run "$s" --propagation both --json -q --db "$db" > "$out/run-$s.json"
done
python "$(dirname "$0")/outcome_fingerprint.py" "$out" > "$out/fingerprint.txt"
echo "fingerprint: $out/fingerprint.txt ($(wc -l < "$out/fingerprint.txt") lines)"
