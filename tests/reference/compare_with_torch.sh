#!/usr/bin/env bash
# Per-step loss of `tessera train` (functional backend) against the PyTorch reference
# (tests/reference/train_ref.py replay --bf16) from the same initial weights and the same
# sample order (--dump-init). Prints the max and median relative loss difference and the step
# of the max; exits 1 when any step differs by more than TOL (env, default 1e-2).
#
# usage: tests/reference/compare_with_torch.sh [STEPS=200] [BATCH=128]
#   env: TOL (default 1e-2), DATA (default /usr/share/datasets/fashion-mnist),
#        TESSERA (default build/bin/tessera), KEEP=1 keeps the temp folder
# Run from anywhere; paths are relative to the repository root.
set -euo pipefail

STEPS=${1:-200}
BATCH=${2:-128}
TOL=${TOL:-1e-2}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
TESSERA=${TESSERA:-build/bin/tessera}
PY=/usr/bin/python3

if [[ ! -x $TESSERA ]]; then
  echo "compare_with_torch: $TESSERA not found (build it: ninja -C build tessera)" >&2
  exit 2
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/tessera-torch.XXXXXX")
if [[ ${KEEP:-0} != 1 ]]; then trap 'rm -rf "$TMP"' EXIT; else echo "keeping $TMP"; fi

echo "== tessera train: $STEPS steps, batch $BATCH (functional backend)"
"$TESSERA" train --backend functional --steps "$STEPS" --batch "$BATCH" --seed 0 \
  --data "$DATA" --dump-init "$TMP/init" --out "$TMP/run" --eval-samples 1000 --no-progress \
  >"$TMP/tessera.log"
tail -n 1 "$TMP/tessera.log"

echo "== PyTorch reference: replay --bf16"
"$PY" "$ROOT/tests/reference/train_ref.py" replay --data "$DATA" --weights "$TMP/init" \
  --order "$TMP/init/order.u32" --batch "$BATCH" --steps "$STEPS" --bf16 --out "$TMP/torch.csv"

"$PY" - "$TMP/run/metrics.csv" "$TMP/torch.csv" "$TOL" "$STEPS" <<'PYEOF'
import csv, statistics, sys

def losses(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {int(r["step"]): float(r["loss"]) for r in rows}

ours, ref = losses(sys.argv[1]), losses(sys.argv[2])
tol, steps = float(sys.argv[3]), int(sys.argv[4])
if sorted(ours) != list(range(steps)) or sorted(ref) != list(range(steps)):
    sys.exit("compare_with_torch: expected steps 0..%d in both (tessera %d rows, torch %d rows)"
             % (steps - 1, len(ours), len(ref)))
rel = [abs(ours[s] - ref[s]) / abs(ref[s]) for s in range(steps)]
worst = max(range(steps), key=lambda s: rel[s])
print("steps %d: loss relative difference max %.3g (step %d: tessera %.9g, torch %.9g), "
      "median %.3g, tolerance %g" % (steps, rel[worst], worst, ours[worst], ref[worst],
                                      statistics.median(rel), tol))
bad = [s for s in range(steps) if rel[s] > tol]
if bad:
    print("FAIL: %d step(s) above tolerance, first %d" % (len(bad), bad[0]))
    sys.exit(1)
print("PASS")
PYEOF
