#!/usr/bin/env bash
# summation_order.sh [MODELS] [PERMUTATIONS] [OUT]: how far a model's training moves when only
# the order of the batch's fp32 sums changes (docs/multichip.md, "Equivalence"). For each model
# (default: the MLP; a model with Dropout is skipped: its masks are keyed to the sample's position
# in the batch, so a reordered batch draws other masks and more than the summation order
# changes), 20 steps at batch 128, seed 1, functional:
#   - one chip (the reference; --dump-init gives the shuffle's sample order),
#   - two chips at the same global batch (the ring sums two half-batch partial sums),
#   - one chip on a copy of the training set arranged so that each of the 20 shuffled batches
#     holds the same 128 samples in another order (PERMUTATIONS random orders, default 10):
#     every per-sample term is the same, only the order the MXU adds them in differs.
# Prints the largest relative per-step loss difference of each against the reference, and the
# fp32 weights after one step that differ (elements, largest difference in ulps). Writes
# OUT/summary.txt (default runs/summation_order).
set -euo pipefail
cd "$(dirname "$0")/.."
models=${1:-"examples/models/mlp.json"}
perms=${2:-10}
out=${3:-runs/summation_order}
tessera=build/bin/tessera
data=${TESSERA_DATA:-/usr/share/datasets/fashion-mnist}
[ -x "$tessera" ] || { echo "summation_order: $tessera not built (make build)" >&2; exit 2; }
mkdir -p "$out"
: > "$out/summary.txt"
run() {  # run DIR STEPS [flags...]: one functional training run into DIR (kept if done)
  local dir=$1 steps=$2
  shift 2
  [ -f "$dir/summary.json" ] && return
  "$tessera" train --model "$m" --backend functional --batch 128 --steps "$steps" --seed 1 \
    --no-progress --out "$dir" "$@" > "$dir.log" 2>&1
}
for m in $models; do
  name=$(basename "$m" .json)
  if grep -qi '"dropout"' "$m"; then
    echo "$name: skipped (Dropout: a reordered batch draws other masks)" | tee -a "$out/summary.txt"
    continue
  fi
  run "$out/$name.ref" 20 --dump-init "$out/$name.init"
  run "$out/$name.chips2" 20 --chips 2
  run "$out/$name.ref1" 1
  run "$out/$name.chips2_1" 1 --chips 2
  for p in $(seq 1 "$perms"); do
    if [ ! -f "$out/$name.perm$p/summary.json" ]; then
      # The training set with each of the first 20 shuffled batches permuted within itself
      # (the shuffle depends only on the seed and the set's size, so the same sample order
      # applies to the copy).
      /usr/bin/python3 - "$out/$name.init/order.u32" "$data" "$out/data.$name.$p" 20 128 "$p" <<'PY'
import array, gzip, os, random, shutil, struct, sys
order_path, src, dst, steps, B, seed = sys.argv[1:7]
steps, B, seed = int(steps), int(B), int(seed)
order = array.array("I")
order.frombytes(open(order_path, "rb").read())
images = gzip.open(f"{src}/train-images-idx3-ubyte.gz", "rb").read()
labels = gzip.open(f"{src}/train-labels-idx1-ubyte.gz", "rb").read()
rows, cols = struct.unpack(">II", images[8:16])
size = rows * cols
new_images, new_labels = bytearray(images), bytearray(labels)
for b in range(steps):
    perm = list(range(B))
    random.Random(seed * 1000 + b).shuffle(perm)
    for i in range(B):
        to, frm = order[b * B + i], order[b * B + perm[i]]
        new_images[16 + to * size:16 + (to + 1) * size] = images[16 + frm * size:16 + (frm + 1) * size]
        new_labels[8 + to] = labels[8 + frm]
os.makedirs(dst, exist_ok=True)
with gzip.open(f"{dst}/train-images-idx3-ubyte.gz", "wb", compresslevel=1) as f:
    f.write(new_images)
with gzip.open(f"{dst}/train-labels-idx1-ubyte.gz", "wb", compresslevel=1) as f:
    f.write(new_labels)
for t in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
    shutil.copy(f"{src}/{t}", f"{dst}/{t}")
PY
      run "$out/$name.perm$p" 20 --data "$out/data.$name.$p"
      [ "$p" = 1 ] && run "$out/$name.perm1_1" 1 --data "$out/data.$name.$p"
      rm -rf "$out/data.$name.$p"
    fi
  done
  /usr/bin/python3 - "$out" "$name" "$perms" >> "$out/summary.txt" <<'PY'
import array, csv, os, statistics, sys
out, name, perms = sys.argv[1], sys.argv[2], int(sys.argv[3])
def losses(d):
    return [float(r["loss"]) for r in csv.DictReader(open(f"{out}/{name}.{d}/metrics.csv"))][:20]
ref = losses("ref")
def rel(d):
    return max(abs(a - b) / abs(a) for a, b in zip(ref, losses(d)))
def weights_diff(d):  # fp32 weights after one step against the reference's
    n = worst = 0
    wd = f"{out}/{name}.ref1/weights"
    for f in sorted(os.listdir(wd)):
        if not f.endswith(".f32") or f.startswith("test"):
            continue
        a, b = array.array("i"), array.array("i")
        a.frombytes(open(f"{wd}/{f}", "rb").read())
        b.frombytes(open(f"{out}/{name}.{d}/weights/{f}", "rb").read())
        for x, y in zip(a, b):
            if x != y:
                n, worst = n + 1, max(worst, abs(x - y))
    return f"{n} fp32 weights differ after one step (at most {worst} ulps)"
p = [rel(f"perm{i}") for i in range(1, perms + 1)]
print(f"{name}: largest relative loss difference over steps 0-19 against one chip:")
print(f"  2 chips                         {rel('chips2'):.2e}; {weights_diff('chips2_1')}")
print(f"  1 chip, batches permuted ({perms:2d}x)  median {statistics.median(p):.2e}, "
      f"max {max(p):.2e}, above 1e-4: {sum(x > 1e-4 for x in p)} of {perms}; "
      f"permutation 1: {weights_diff('perm1_1')}")
print("  each permutation: " + " ".join(f"{x:.1e}" for x in p))
PY
done
cat "$out/summary.txt"
