#!/usr/bin/env bash
# make bench (SystemC part): the platform's cost against the plain harness. For the idle chip
# (N = 4 and 16: the clock, refresh and one SystemC activation a cycle in AT mode) and one
# training step (N = 16, batch BENCH_SYSTEMC_BATCH, default 4: the run alone), each harness —
# plain ChipSim, the platform loosely timed (lt) and approximately timed (at) — is measured
# BENCH_SYSTEMC_REPS times (default 3), one process per measurement (build/bin/systemc_cost).
# Writes <out>/systemc.json: medians of chip cycles per wall second, the overhead per cycle in
# ns and the ratio against plain, and checks the step's cycles are the same in all three.
set -euo pipefail
out=$(realpath -m "${1:-build/bench}")
cd "$(dirname "$0")/.."
bin=${SYSTEMC_COST_BIN:-build/bin/systemc_cost}
[ -x "$bin" ] || { echo "bench_systemc: $bin not built" >&2; exit 1; }
reps=${BENCH_SYSTEMC_REPS:-3}
batch=${BENCH_SYSTEMC_BATCH:-4}
mkdir -p "$out"
raw="$out/systemc-raw.jsonl"
: > "$raw"
for rep in $(seq "$reps"); do
  for h in plain lt at; do
    for n in 4 16; do "$bin" "$h" idle "$n" 2>/dev/null | grep '^{' >> "$raw"; done
    "$bin" "$h" step 16 "$batch" 2>/dev/null | grep '^{' >> "$raw"
  done
done
/usr/bin/python3 - "$raw" "$out/systemc.json" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
res = []
def median(h, work, n):
    sel = [r for r in rows if r["harness"] == h and r["work"] == work and r["n"] == n]
    return statistics.median(r["cycles_per_second"] for r in sel), sel
for work, n in (("idle", 4), ("idle", 16), ("step", 16)):
    base, sel = median("plain", work, n)
    cycles = {r["cycles"] for h in ("plain", "lt", "at") for r in median(h, work, n)[1]}
    p = {"work": work, "n": n, "batch": sel[0]["batch"], "reps": len(sel)}
    if work == "step":
        if len(cycles) != 1: sys.exit(f"bench_systemc: step cycles differ between harnesses: {cycles}")
        res.append({"name": "systemc_step_cycles", "value": cycles.pop(), "unit": "cycles (same in plain, lt, at)", "params": p})
    for h in ("plain", "lt", "at"):
        cps, _ = median(h, work, n)
        res.append({"name": f"systemc_{work}_{h}_speed", "value": round(cps), "unit": "chip cycles / wall s (median)", "params": p})
        if h != "plain":
            res.append({"name": f"systemc_{work}_{h}_overhead", "value": round((1 / cps - 1 / base) * 1e9, 1), "unit": "ns per chip cycle vs plain", "params": p})
            res.append({"name": f"systemc_{work}_{h}_ratio", "value": round(base / cps, 3), "unit": "x plain wall time", "params": p})
json.dump(res, open(sys.argv[2], "w"), indent=1)
for r in res: print(f"{r['name']:32s} {r['value']} {r['unit']}  {r['params']}")
PY
