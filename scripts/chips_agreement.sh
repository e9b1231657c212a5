#!/usr/bin/env bash
# chips_agreement.sh [MODELS] [OUT]: the same training on one chip and on two (docs/multichip.md,
# "Equivalence"): for each model (default: the example CNN, the MLP, the two-conv network) one
# epoch at batch 128, seed 1, on the functional backend with --chips 1 and --chips 2 (the
# functional ring: bit-identical to the rtl ring, tests/rtl/test_dense_step_rtl.cc), then the
# largest relative per-step loss difference over the first 20 steps and the two test
# accuracies. Targets: loss within 1e-4 relative, accuracy within 0.3 points. Writes
# OUT/summary.txt (default runs/chips_agreement).
set -euo pipefail
cd "$(dirname "$0")/.."
models=${1:-"examples/models/example_cnn.json examples/models/mlp.json examples/models/two_conv_cnn.json"}
out=${2:-runs/chips_agreement}
tessera=build/bin/tessera
[ -x "$tessera" ] || { echo "chips_agreement: $tessera not built (make build)" >&2; exit 2; }
mkdir -p "$out"
: > "$out/summary.txt"
for m in $models; do
  name=$(basename "$m" .json)
  for c in 1 2; do
    [ -f "$out/$name.$c/summary.json" ] && continue
    "$tessera" train --model "$m" --backend functional --batch 128 --epochs 1 --seed 1 \
      --chips "$c" --no-progress --out "$out/$name.$c" > "$out/$name.$c.log" 2>&1
  done
  /usr/bin/python3 - "$out/$name.1" "$out/$name.2" "$name" >> "$out/summary.txt" <<'PY'
import csv, json, sys
a, b, name = sys.argv[1], sys.argv[2], sys.argv[3]
la = [float(r["loss"]) for r in csv.DictReader(open(a + "/metrics.csv"))][:20]
lb = [float(r["loss"]) for r in csv.DictReader(open(b + "/metrics.csv"))][:20]
rel = max(abs(x - y) / abs(x) for x, y in zip(la, lb))
sa, sb = json.load(open(a + "/summary.json")), json.load(open(b + "/summary.json"))
print(f"{name:16s} loss, first 20 steps: max rel diff {rel:.2e}; test accuracy 1 chip "
      f"{100 * sa['test_accuracy']:.2f}%, 2 chips {100 * sb['test_accuracy']:.2f}% "
      f"(diff {100 * (sb['test_accuracy'] - sa['test_accuracy']):+.2f} points)")
PY
done
cat "$out/summary.txt"
