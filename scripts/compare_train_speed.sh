#!/usr/bin/env bash
# `make train`'s wall time a step, this tree against an older commit, measured in one run:
#   scripts/compare_train_speed.sh OLD_REV [REPS] [STEPS]
# builds OLD_REV's build/bin/tessera in a temporary git worktree (OLD_TREE=DIR: an existing
# one, already built), then runs `tessera train` with make train's flags (TRAIN_ARGS, the
# Makefile's default) for STEPS steps (default 20) from both trees alternately, REPS times each
# (default 3), and prints the median of each run's per-step wall seconds (metrics.csv: the
# steady state, without set-up and evaluation), the medians over the runs, the ratio and each
# binary's step cycles, and checks every step's loss and accuracy are the same (exit 1 if not).
# Wall times on the shared 2-core hosts move by +-20% from hour to hour:
# only binaries alternated in one run are compared. docs/performance.md quotes such runs.
set -euo pipefail
old_rev=${1:?usage: scripts/compare_train_speed.sh OLD_REV [REPS] [STEPS]}
reps=${2:-3}
steps=${3:-20}
cd "$(dirname "$0")/.."
new_bin=build/bin/tessera
[ -x "$new_bin" ] || { echo "compare_train_speed: $new_bin not built" >&2; exit 1; }
args=${TRAIN_ARGS:-"--backend rtl --arith host --array 16 --batch 128 --chips 2 --seed 1"}
tree=${OLD_TREE:-}
if [ -z "$tree" ]; then
  tree=$(mktemp -d /tmp/tessera_old_tree.XXXXXX)
  cleanup() { git worktree remove --force "$tree" 2>/dev/null || true; rm -rf "$tree"; }
  trap cleanup EXIT
  git worktree add --detach -f "$tree" "$old_rev" > /dev/null
  cxx=$(sed -n 's/^set(CMAKE_CXX_COMPILER "\(.*\)")$/\1/p' \
          build/CMakeFiles/*/CMakeCXXCompiler.cmake | tail -1)
  cmake -S "$tree" -B "$tree/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    ${cxx:+-DCMAKE_CXX_COMPILER="$cxx"} > /dev/null
  cmake --build "$tree/build" -j "$(nproc)" --target tessera > /dev/null
fi
old_bin=$tree/build/bin/tessera
runs=$(mktemp -d /tmp/tessera_train_speed.XXXXXX)
# shellcheck disable=SC2086
for ((i = 0; i < reps; i++)); do
  for tag in old new; do
    bin=$new_bin
    [ "$tag" = old ] && bin=$old_bin
    "$bin" train $args --steps "$steps" --eval-samples 16 --no-progress \
      --out "$runs/$tag.$i" > /dev/null 2>&1
  done
done
/usr/bin/python3 - "$runs" "$reps" <<'PY'
import csv, json, statistics, sys
runs, reps = sys.argv[1], int(sys.argv[2])
med = {}
for tag in ("old", "new"):
    per = []
    for i in range(reps):
        rows = list(csv.DictReader(open(f"{runs}/{tag}.{i}/metrics.csv")))
        per.append(statistics.median(float(r["wall_seconds"]) for r in rows[1:]))
    med[tag] = statistics.median(per)
    cyc = json.load(open(f"{runs}/{tag}.0/summary.json"))["step_cycles"][0]
    print(f"{tag}: median step wall {med[tag]:.3f} s (runs {', '.join(f'{x:.3f}' for x in per)}), "
          f"{cyc} cycles a step (chip 0)")
print(f"new / old: {med['new'] / med['old']:.3f}x the wall time a step")
# the training itself must not move: every step's loss and accuracy equal, to the last digit
def curve(tag):
    return [(r["loss"], r["accuracy"]) for r in csv.DictReader(open(f"{runs}/{tag}.0/metrics.csv"))]
same = curve("old") == curve("new")
print("loss and accuracy of every step: " + ("identical" if same else "DIFFERENT"))
if not same:
    sys.exit(1)
PY
rm -rf "$runs"
