#!/usr/bin/env bash
# Per-step loss of `tessera train --model` (functional backend) for seven Dense stacks (one
# with a cosine learning-rate schedule, one behind a Normalization layer) against tests/reference/dense_ref.py loss-match
# (PyTorch with the chip's rounding points and MXU accumulation order) from the same initial
# weights (--dump-init) and sample order (tessera data-order). Exits 1 when any step of any
# model differs by more than TOL.
#
# usage: tests/reference/dense_loss_match.sh [STEPS=50] [BATCH=128]
#   env: TOL (default 1e-3), DATA, TESSERA (default build/bin/tessera), ARRAY (default 16)
set -euo pipefail
STEPS=${1:-50}
BATCH=${2:-128}
TOL=${TOL:-1e-3}
ARRAY=${ARRAY:-16}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
TESSERA=${TESSERA:-build/bin/tessera}
[[ -x $TESSERA ]] || { echo "dense_loss_match: $TESSERA not found" >&2; exit 2; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tessera-dense.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# name: hidden layers as units[:linear][:schedule][:norm], the softmax layer is Dense(10); a
# schedule (tessera train --lr-schedule) runs at lr 3e-3 decaying over the STEPS; norm: a
# Normalization(mean 0.286, variance 0.1246) first (the host normalizes the images)
MODELS=("mlp:256" "logistic:" "deep:128,64" "linear_hidden:64:linear" "wide:512,256"
        "mlp_cosine:256::cosine" "mlp_normalized:256:::norm")
status=0
for i in "${!MODELS[@]}"; do
  IFS=: read -r name hidden act sched norm <<<"${MODELS[$i]}"
  opt=()
  [[ -n $sched ]] && opt=(--lr 3e-3 --lr-schedule "$sched")
  layers='{"class_name": "Flatten"}'
  [[ -n $norm ]] && layers='{"class_name": "Normalization", "mean": 0.286, "variance": 0.1246}, '$layers
  IFS=, read -ra units <<<"$hidden"
  for u in "${units[@]}"; do
    [[ -n $u ]] && layers+=", {\"class_name\": \"Dense\", \"units\": $u, \"activation\": \"${act:-relu}\"}"
  done
  layers+=', {"class_name": "Dense", "units": 10, "activation": "softmax"}'
  echo "{\"name\": \"$name\", \"input_shape\": [28, 28, 1], \"layers\": [$layers]}" >"$TMP/$name.json"
  seed=$((11 + i))
  "$TESSERA" train --model "$TMP/$name.json" --backend functional --array "$ARRAY" \
    --steps "$STEPS" --batch "$BATCH" --seed "$seed" "${opt[@]}" --eval-samples 128 --no-progress \
    --data "$DATA" --dump-init "$TMP/$name.init" --out "$TMP/$name.run" >/dev/null
  "$TESSERA" data-order --seed "$seed" --batch "$BATCH" --steps "$STEPS" --data "$DATA" \
    -o "$TMP/$name.order"
  echo -n "$name ($hidden${act:+ $act}${sched:+, $sched}): "
  /usr/bin/python3 tests/reference/dense_ref.py loss-match --init "$TMP/$name.init" \
    --order "$TMP/$name.order" --metrics "$TMP/$name.run/metrics.csv" --data "$DATA" \
    --steps "$STEPS" --batch "$BATCH" --tol "$TOL" --array "$ARRAY" "${opt[@]}" || status=1
done
exit $status
