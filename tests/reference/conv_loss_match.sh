#!/usr/bin/env bash
# Per-step loss of `tessera train --model` (functional backend) for six convolutional models
# (one behind a Normalization layer)
# against tests/reference/dense_ref.py loss-match (PyTorch with the chip's rounding points, MXU
# accumulation order, im2col convolution and VPU softmax) from the same initial weights
# (--dump-init) and sample order (tessera data-order). Exits 1 when any step of any model
# differs by more than TOL.
#
# usage: tests/reference/conv_loss_match.sh [STEPS=50] [BATCH=32]
#   env: TOL (default 1e-3), DATA, TESSERA (default build/bin/tessera), ARRAY (default 16)
set -euo pipefail
STEPS=${1:-50}
BATCH=${2:-32}
TOL=${TOL:-1e-3}
ARRAY=${ARRAY:-16}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
TESSERA=${TESSERA:-build/bin/tessera}
[[ -x $TESSERA ]] || { echo "conv_loss_match: $TESSERA not found" >&2; exit 2; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tessera-conv.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

conv() { echo "{\"class_name\": \"Conv2D\", \"filters\": $1, \"kernel_size\": $2, \"strides\": $3, \"padding\": \"$4\", \"activation\": \"$5\"}, "; }
pool() { echo "{\"class_name\": \"$1\", \"pool_size\": $2}, "; }
flat='{"class_name": "Flatten"}, '
dense() { echo "{\"class_name\": \"Dense\", \"units\": $1, \"activation\": \"$2\"}"; }
declare -A MODELS
MODELS[conv_maxpool]="$(conv 8 3 1 valid relu)$(pool MaxPool2D 2)$flat$(dense 10 softmax)"
MODELS[strided_same_avgpool]="$(conv 8 5 2 same relu)$(pool AveragePooling2D 2)$flat$(dense 10 softmax)"
MODELS[two_conv_hidden]="$(conv 4 3 1 valid relu)$(pool MaxPool2D 3)$(conv 8 3 1 same relu)$(pool MaxPool2D 2)$flat$(dense 16 relu), $(dense 10 softmax)"
MODELS[linear_7x7_stride2]="$(conv 6 7 2 valid linear)$flat$(dense 10 softmax)"
MODELS[normalized_conv]='{"class_name": "Normalization", "mean": 0.286, "variance": 0.1246}, '"$(conv 8 3 1 valid relu)$(pool MaxPool2D 2)$flat$(dense 10 softmax)"
MODELS[pointwise_avg3_stride2]="$(conv 4 1 1 valid relu)$(pool AveragePooling2D 3)$(conv 8 3 2 valid relu)$flat$(dense 10 softmax)"
status=0
i=0
for name in conv_maxpool strided_same_avgpool two_conv_hidden linear_7x7_stride2 pointwise_avg3_stride2 \
    normalized_conv; do
  echo "{\"name\": \"$name\", \"input_shape\": [28, 28, 1], \"layers\": [${MODELS[$name]}]}" >"$TMP/$name.json"
  seed=$((21 + i))
  i=$((i + 1))
  "$TESSERA" train --model "$TMP/$name.json" --backend functional --array "$ARRAY" \
    --steps "$STEPS" --batch "$BATCH" --seed "$seed" --eval-samples 128 --no-progress \
    --data "$DATA" --dump-init "$TMP/$name.init" --out "$TMP/$name.run" >/dev/null
  "$TESSERA" data-order --seed "$seed" --batch "$BATCH" --steps "$STEPS" --data "$DATA" \
    -o "$TMP/$name.order"
  echo -n "$name: "
  /usr/bin/python3 tests/reference/dense_ref.py loss-match --init "$TMP/$name.init" \
    --order "$TMP/$name.order" --metrics "$TMP/$name.run/metrics.csv" --data "$DATA" \
    --steps "$STEPS" --batch "$BATCH" --tol "$TOL" --array "$ARRAY" || status=1
done
exit $status
