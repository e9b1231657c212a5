#!/usr/bin/env bash
# Simulation speed of the chip, this tree against an older commit, measured in one run:
#   scripts/compare_sim_speed.sh OLD_REV [REPS]
# builds OLD_REV's build/bin/systemc_cost in a temporary git worktree (ccache makes the models
# that did not change cheap), then runs `systemc_cost plain idle 16` and `systemc_cost plain
# step 16 4` (BATCH=... for another batch) from both trees alternately, REPS times each
# (default 5), and prints the medians of chip cycles per wall second, the ratio, and the cycle
# counts (which must be equal: a faster model that changes a cycle is a different chip; with
# ALLOW_CYCLE_CHANGE=1 a change that alters the cycle counts on purpose is compared by median
# wall seconds too, and does not fail). This tree's build/bin/systemc_cost must be built.
# docs/performance.md, "Simulation speed of the chip", quotes such runs.
# With INSTRUCTIONS=1 it instead counts the host instructions of one batch-8 step (BATCH=...)
# for both binaries under valgrind's cachegrind (apt-get install valgrind), side by side: a
# count is the same on a loaded or a quiet machine, where wall times on these shared 2-core
# hosts spread by +-20% (it does not see branch mispredictions or cache misses; ~2-3 minutes).
set -euo pipefail
old_rev=${1:?usage: scripts/compare_sim_speed.sh OLD_REV [REPS]}
reps=${2:-5}
cd "$(dirname "$0")/.."
new_bin=build/bin/systemc_cost
[ -x "$new_bin" ] || { echo "compare_sim_speed: $new_bin not built" >&2; exit 1; }
tree=$(mktemp -d /tmp/tessera_old_tree.XXXXXX)
cleanup() { git worktree remove --force "$tree" 2>/dev/null || true; rm -rf "$tree"; }
trap cleanup EXIT
git worktree add --detach -f "$tree" "$old_rev" > /dev/null
# The old tree is compiled by this build's C++ compiler (the compiler changes the model's speed
# as much as an RTL change can), unless OLD_CXX names another: OLD_CXX=g++ compares the
# compilers too (docs/performance.md, "Simulation speed of the chip").
cxx=${OLD_CXX:-$(sed -n 's/^set(CMAKE_CXX_COMPILER "\(.*\)")$/\1/p' \
                    build/CMakeFiles/*/CMakeCXXCompiler.cmake | tail -1)}
cmake -S "$tree" -B "$tree/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  ${cxx:+-DCMAKE_CXX_COMPILER="$cxx"} > /dev/null
cmake --build "$tree/build" -j "$(nproc)" --target systemc_cost > /dev/null
if [ "${INSTRUCTIONS:-0}" = 1 ]; then
  command -v valgrind > /dev/null ||
    { echo "compare_sim_speed: valgrind not installed" >&2; exit 1; }
  batch=${BATCH:-8}
  for tag in old new; do
    bin=$new_bin
    [ "$tag" = old ] && bin=$tree/build/bin/systemc_cost
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
      "$bin" plain step 16 "$batch" > "$tree/$tag.log" 2>&1 &
  done
  wait
  for tag in old new; do
    ir=$(grep -E 'I +refs:' "$tree/$tag.log" | sed 's/.*refs: *//; s/,//g')
    cycles=$(grep -o '"cycles": [0-9]*' "$tree/$tag.log" | grep -o '[0-9]*$')
    echo "$tag: $ir instructions, $cycles chip cycles, $((ir / cycles)) instructions a cycle"
    eval "ir_$tag=$ir; cycles_$tag=$cycles"
  done
  /usr/bin/python3 -c "print(f'ratio old/new {$ir_old / $ir_new:.3f}x')"
  [ "$cycles_old" = "$cycles_new" ] || [ "${ALLOW_CYCLE_CHANGE:-0}" = 1 ] ||
    { echo "compare_sim_speed: the cycle counts differ" >&2; exit 1; }
  exit 0
fi
raw=$(mktemp)
for _ in $(seq "$reps"); do
  for tag in old new; do
    bin=$new_bin
    [ "$tag" = old ] && bin=$tree/build/bin/systemc_cost
    for work in "idle 16" "step 16 ${BATCH:-4}"; do
      # shellcheck disable=SC2086
      "$bin" plain $work 2>/dev/null | grep '^{' | sed "s/^{/{\"tag\": \"$tag\", /" >> "$raw"
    done
  done
done
ALLOW_CYCLE_CHANGE=${ALLOW_CYCLE_CHANGE:-0} /usr/bin/python3 - "$raw" "$old_rev" <<'PY'
import json, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
allow = os.environ["ALLOW_CYCLE_CHANGE"] == "1"
ok = True
for work in ("idle", "step"):
    med, cycles, wall = {}, {}, {}
    for tag in ("old", "new"):
        sel = [r for r in rows if r["tag"] == tag and r["work"] == work]
        med[tag] = statistics.median(r["cycles_per_second"] for r in sel)
        wall[tag] = statistics.median(r["wall_seconds"] for r in sel)
        cycles[tag] = {r["cycles"] for r in sel}
    same = cycles["old"] == cycles["new"] and len(cycles["new"]) == 1
    ok = ok and (same or allow)
    differ = "" if same else (f" DIFFER from {sorted(cycles['old'])}; wall "
                              f"{wall['old']:.3f} -> {wall['new']:.3f} s")
    print(f"{work:5s} {sys.argv[2]}: {med['old']:9.0f}  this tree: {med['new']:9.0f} cycles/s  "
          f"ratio {med['new'] / med['old']:.2f}x  cycles {sorted(cycles['new'])}{differ}")
sys.exit(0 if ok else 1)
PY
rm -f "$raw"
