#!/usr/bin/env bash
# accuracy_seeds.sh [SEEDS="0 1 2 3 4"] [OUT=runs/accuracy]: the issue's accuracy measurement on
# the chip's functional backend (bit-identical to the rtl chip) over several seeds. For each
# seed: 1 epoch at batch 128 (468 steps) into OUT/seedS-1epoch, evaluated on the 10,000 test
# images; then --resume from that checkpoint to 3 epochs (1404 steps) into OUT/seedS-3epochs
# (a resumed run ends bit-identical to an uninterrupted one: test_checkpoint). Prints a table
# (seed, test accuracy and loss after 1 and 3 epochs) and the minimum, median and maximum over
# the seeds; also written to OUT/summary.txt. docs/training.md, "Accuracy".
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-"0 1 2 3 4"}
out=${2:-runs/accuracy}
tessera=${TESSERA:-build/bin/tessera}
[ -x "$tessera" ] || { echo "accuracy_seeds: $tessera not built (make build)" >&2; exit 2; }
mkdir -p "$out"
field() {  # field RUN_DIR NAME: a number from summary.json
  sed -n "s/.*\"$2\": *\([-0-9.eE+]*\).*/\1/p" "$1/summary.json" | head -1
}
for s in $seeds; do
  e1=$out/seed$s-1epoch e3=$out/seed$s-3epochs
  if [ ! -f "$e1/summary.json" ]; then
    "$tessera" train --backend functional --epochs 1 --batch 128 --seed "$s" --out "$e1" \
      --no-progress > "$out/seed$s-1epoch.log" 2>&1
  fi
  if [ ! -f "$e3/summary.json" ]; then
    "$tessera" train --backend functional --epochs 3 --batch 128 --seed "$s" --resume "$e1" \
      --out "$e3" --no-progress > "$out/seed$s-3epochs.log" 2>&1
  fi
done
{
  echo "seed  acc_1epoch  loss_1epoch  acc_3epochs  loss_3epochs"
  for s in $seeds; do
    e1=$out/seed$s-1epoch e3=$out/seed$s-3epochs
    printf '%4s  %10.4f  %11.4f  %11.4f  %12.4f\n' "$s" "$(field "$e1" test_accuracy)" \
      "$(field "$e1" test_loss)" "$(field "$e3" test_accuracy)" "$(field "$e3" test_loss)"
  done
} > "$out/table.txt"
python3 - "$out/table.txt" > "$out/summary.txt" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:]]
print(open(sys.argv[1]).read(), end="")
for name, col in (("1 epoch", 1), ("3 epochs", 3)):
    v = sorted(float(r[col]) for r in rows)
    print(f"{name}: min {100*v[0]:.2f}%  median {100*statistics.median(v):.2f}%  "
          f"max {100*v[-1]:.2f}%  over {len(v)} seeds")
PY
cat "$out/summary.txt"
