#!/usr/bin/env bash
# crosscheck_accuracy.sh [EPOCHS=1] [SEEDS="0 1 2"]: the test accuracy PyTorch reaches from the
# initial weights and in the batch order that `tessera train --seed S` uses (docs/training.md,
# "Accuracy"), for each seed: tessera's glorot weights (`tessera train --steps 1 --dump-init`),
# its pipeline's order (`tessera data-order`), `train_ref.py replay --bf16` (the chip's rounding
# points), then `eval_weights.py` on the test set. The chip trains step for step like this replay
# (compare_with_torch.sh), so this predicts the chip's accuracy for a seed in minutes instead of
# the functional backend's ~20 minutes an epoch. Prints "seed epochs test_loss test_accuracy".
set -euo pipefail
cd "$(dirname "$0")/../.."
epochs=${1:-1}
seeds=${2:-"0 1 2"}
tessera=${TESSERA:-build/bin/tessera}
data=${DATA:-/usr/share/datasets/fashion-mnist}
[ -x "$tessera" ] || { echo "crosscheck_accuracy: $tessera not built" >&2; exit 2; }
steps=$((epochs * (60000 / 128)))  # whole batches: tessera drops the partial last one
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-crosscheck.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
for s in $seeds; do
  "$tessera" train --backend functional --steps 1 --batch 128 --seed "$s" --dump-init "$tmp/init$s" \
    --out "$tmp/run$s" --eval-samples 128 --no-progress > /dev/null
  "$tessera" data-order --seed "$s" --batch 128 --steps "$steps" -o "$tmp/order$s.u32"
  /usr/bin/python3 tests/reference/train_ref.py replay --data "$data" --weights "$tmp/init$s" \
    --order "$tmp/order$s.u32" --batch 128 --steps "$steps" --bf16 --out "$tmp/loss$s.csv" \
    --final-weights "$tmp/final$s" > /dev/null
  echo "$s $epochs $(/usr/bin/python3 tests/reference/eval_weights.py "$tmp/final$s" --data "$data")"
done
