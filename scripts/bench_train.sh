#!/usr/bin/env bash
# make bench (training part): the example CNN's training step on the rtl chip at N = 16, batch
# BENCH_TRAIN_BATCH (default 128), BENCH_TRAIN_STEPS steps (default 3; the cycles are identical
# every step, wall time is the median), on both builds of the chip — the pure RTL (--arith rtl)
# and the host-arithmetic build (--arith host), one after the other on one core — plus the
# functional backend's wall time per step for the same batch. The two builds' metrics must agree
# but for wall time (the bench fails otherwise). Writes <out>/train.json (a JSON array of
# {"name", "value", "unit", "params"}, as hbm.json) and leaves the run folders
# (cycle_report.txt, timeline.json, roofline.png) under <out>/train-rtl, <out>/train-host and
# <out>/train-functional.
set -euo pipefail
out=$(realpath -m "${1:-build/bench}")
cd "$(dirname "$0")/.."
tessera=${TESSERA_BIN:-build/bin/tessera}
[ -x "$tessera" ] || { echo "bench_train: $tessera not built" >&2; exit 1; }
batch=${BENCH_TRAIN_BATCH:-128}
steps=${BENCH_TRAIN_STEPS:-3}
mkdir -p "$out"
rm -rf "$out/train-rtl" "$out/train-host" "$out/train-functional"
for arith in rtl host; do
  "$tessera" train --backend rtl --arith "$arith" --array 16 --batch "$batch" --steps "$steps" \
    --eval-samples 256 --no-progress --out "$out/train-$arith" > "$out/train-$arith.log"
done
"$tessera" train --backend functional --array 16 --batch "$batch" --steps "$steps" \
  --eval-samples 256 --no-progress --out "$out/train-functional" > "$out/train-functional.log"
/usr/bin/python3 - "$out" "$batch" <<'PY'
import csv, json, statistics, sys
out, batch = sys.argv[1], int(sys.argv[2])
def run(name):
    s = json.load(open(f"{out}/{name}/summary.json"))
    rows = list(csv.DictReader(open(f"{out}/{name}/metrics.csv")))
    return s, statistics.median(float(r["wall_seconds"]) for r in rows)
rtl, rtl_wall = run("train-rtl")
host, host_wall = run("train-host")
fun, fun_wall = run("train-functional")
def without_wall(name):
    return [{k: v for k, v in r.items() if k != "wall_seconds"}
            for r in csv.DictReader(open(f"{out}/{name}/metrics.csv"))]
if without_wall("train-rtl") != without_wall("train-host"):
    sys.exit("bench_train: the host-arithmetic build's steps differ from the pure RTL's")
cyc = rtl["step_cycles"][0]
bound = rtl["roofline_bound_cycles"]
p = {"array": 16, "batch": batch}
res = [
    {"name": "train_step_cycles", "value": cyc, "unit": "cycles", "params": p},
    {"name": "train_step_cycles_identical", "value": rtl["step_cycles_identical"], "unit": "bool", "params": p},
    {"name": "train_step_bound_cycles", "value": bound, "unit": "cycles (roofline: per phase the largest of the MXU, VPU, DMA, HBM, ICI and SEQ bounds)", "params": p},
    {"name": "train_step_cycles_over_bound", "value": round(cyc / bound, 3), "unit": "x (cycles / roofline bound)", "params": p},
    {"name": "train_mxu_utilization", "value": rtl["mxu_utilization"], "unit": "MACs / (N^2 cycles)", "params": p},
    {"name": "train_step_wall_rtl", "value": rtl_wall, "unit": "s (median, pure-RTL build)", "params": p},
    {"name": "train_step_wall_host_arith", "value": host_wall, "unit": "s (median, host-arithmetic build)", "params": p},
    {"name": "train_host_arith_speedup", "value": round(rtl_wall / host_wall, 3), "unit": "x (rtl / host wall)", "params": p},
    {"name": "train_builds_identical", "value": True, "unit": "bool (metrics and cycles of both builds)", "params": p},
    {"name": "train_step_wall_functional", "value": fun_wall, "unit": "s (median)", "params": p},
    {"name": "train_rtl_sim_speed", "value": round(cyc / rtl_wall), "unit": "chip cycles / s", "params": p},
    {"name": "train_host_arith_sim_speed", "value": round(cyc / host_wall), "unit": "chip cycles / s", "params": p},
]
json.dump(res, open(f"{out}/train.json", "w"), indent=1)
for r in res: print(f"{r['name']:32s} {r['value']} {r['unit']}")
PY
echo "per-phase breakdown: $out/train-rtl/cycle_report.txt"
