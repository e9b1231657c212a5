#!/usr/bin/env bash
# Test accuracy of a Dense-stack model after E epochs, for three seeds: `tessera train --model`
# on the functional backend, and the same model in fp32 PyTorch (tests/reference/dense_ref.py
# train) from the same initial weights and sample order. Prints one line per seed and the
# medians.
#
# usage: tests/reference/dense_accuracy.sh [MODEL=examples/models/mlp.json] [EPOCHS=3]
#   env: SEEDS (default "1 2 3"), BATCH (128), LR (1e-3, Adam), SCHEDULE
#        (constant; cosine, linear: tessera train --lr-schedule), BETA2 (Adam's beta_2, 0.999),
#        LS (label smoothing, 0), DATA, TESSERA (default build/bin/tessera)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
MODEL=${1:-examples/models/mlp.json}
EPOCHS=${2:-3}
SEEDS=${SEEDS:-1 2 3}
BATCH=${BATCH:-128}
LR=${LR:-1e-3}
SCHEDULE=${SCHEDULE:-constant}
BETA2=${BETA2:-0.999}
LS=${LS:-0}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
TESSERA=${TESSERA:-build/bin/tessera}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tessera-acc.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
chip=() torch=()
for s in $SEEDS; do
  "$TESSERA" train --model "$MODEL" --backend functional --epochs "$EPOCHS" --batch "$BATCH" \
    --lr "$LR" --lr-schedule "$SCHEDULE" --beta2 "$BETA2" --label-smoothing "$LS" \
    --seed "$s" --data "$DATA" --no-progress \
    --dump-init "$TMP/init$s" --out "$TMP/run$s" \
    >"$TMP/log$s"
  a=$(sed -n 's/.*"test_accuracy": \([0-9.e-]*\).*/\1/p' "$TMP/run$s/summary.json")
  steps=$(sed -n 's/.*"steps": \([0-9]*\).*/\1/p' "$TMP/run$s/summary.json")
  "$TESSERA" data-order --seed "$s" --batch "$BATCH" --steps "$steps" --data "$DATA" \
    -o "$TMP/order$s"
  t=$(/usr/bin/python3 tests/reference/dense_ref.py train --init "$TMP/init$s" \
    --order "$TMP/order$s" --data "$DATA" --epochs "$EPOCHS" --batch "$BATCH" \
    --lr "$LR" --lr-schedule "$SCHEDULE" --beta2 "$BETA2" --label-smoothing "$LS" |
    sed -n 's/.*test accuracy \([0-9.]*\).*/\1/p')
  echo "seed $s: chip (functional) $a, PyTorch fp32 $t"
  chip+=("$a") torch+=("$t")
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
echo "median: chip $(median "${chip[@]}"), PyTorch $(median "${torch[@]}")"
