#!/usr/bin/env bash
# The fuzz targets (fuzz/, docs/testing.md "Fuzzing"): configures and builds build/fuzz with
# clang++ (libFuzzer, ASan, UBSan), writes the generated seeds (make_seeds), then runs each
# target for FUZZ_S seconds on its working corpus build/fuzz/corpus/<target>, seeded from
# fuzz/corpus/<target> and build/fuzz/seeds/<target>; crash inputs go to
# build/fuzz/artifacts/<target>/, the log to build/fuzz/logs/<target>.log. Prints one line per
# target (executions, final cov/ft, libFuzzer's corpus: inputs/bytes, and the files in the
# corpus folder, findings) and exits 1 if any target found something (a crash, leak, timeout or
# out-of-memory input).
# Usage: scripts/fuzz.sh [TARGET...]     (default: every target; names without fuzz_)
# Environment: FUZZ_S seconds per target (60), FUZZ_PARALLEL targets at a time (1),
#              FUZZ_BUILD_JOBS compile jobs (1), BUILD the build folder (build).
# Replay an input: build/fuzz/fuzz_<target> FILE (it runs FILE once and reports).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
secs="${FUZZ_S:-60}"
parallel="${FUZZ_PARALLEL:-1}"
out="${BUILD:-build}/fuzz"
all_targets=(idx asm program checkpoint hbm_trace fpu_vectors model weights tfrecord)
if [ $# -gt 0 ]; then targets=("$@"); else targets=("${all_targets[@]}"); fi
for t in "${targets[@]}"; do
  if [ ! -f "fuzz/fuzz_$t.cc" ]; then
    echo "fuzz: no target '$t' (targets: ${all_targets[*]})" >&2
    exit 2
  fi
done

generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
if [ ! -f "$out/CMakeCache.txt" ]; then
  CXX=clang++ cmake -S fuzz -B "$out" "${generator[@]}" -DCMAKE_CXX_COMPILER=clang++ >/dev/null
fi
cmake --build "$out" -j "${FUZZ_BUILD_JOBS:-1}"
"$out/make_seeds" "$out/seeds"

# One target: its run, then its summary line into $out/logs/<target>.summary.
run_target() {
  local t="$1"
  local corpus="$out/corpus/$t" artifacts="$out/artifacts/$t" log="$out/logs/$t.log"
  mkdir -p "$corpus" "$artifacts" "$out/logs" "$out/tmp/$t"
  local marker="$out/logs/$t.start"
  : >"$marker"
  local args=(-max_total_time="$secs" -print_final_stats=1 -timeout=25 -rss_limit_mb=2048
    -artifact_prefix="$artifacts/")
  [ -f "fuzz/dict/$t.dict" ] && args+=(-dict="fuzz/dict/$t.dict")
  local dirs=("$corpus")
  [ -d "fuzz/corpus/$t" ] && dirs+=("fuzz/corpus/$t")
  [ -d "$out/seeds/$t" ] && dirs+=("$out/seeds/$t")
  local rc=0
  TMPDIR="$(cd "$out/tmp/$t" && pwd)" "$out/fuzz_$t" "${args[@]}" "${dirs[@]}" >"$log" 2>&1 || rc=$?
  local execs rate cov ft corp found files
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
  cov="$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)"
  ft="$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)"
  found="$(find "$artifacts" -type f -newer "$marker" \
    \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)"
  corp="$(grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" | tail -1 | cut -d' ' -f2)"
  files="$(find "$corpus" -type f | wc -l)"
  local verdict="ok"
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then verdict="FOUND (exit $rc; see $log)"; fi
  printf 'fuzz_%-12s %ss  executions %s (%s/s)  cov: %s ft: %s  corp: %s (%s files)  findings %s  %s\n' \
    "$t" "$secs" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$files" "$found" \
    "$verdict" \
    >"$out/logs/$t.summary"
  [ "$verdict" = "ok" ]
}

status=0
pids=()
for t in "${targets[@]}"; do
  run_target "$t" &
  pids+=($!)
  if [ "${#pids[@]}" -ge "$parallel" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
for t in "${targets[@]}"; do cat "$out/logs/$t.summary"; done
if [ "$status" -ne 0 ]; then
  echo "fuzz: findings; replay one with $out/fuzz_<target> $out/artifacts/<target>/<file>" >&2
fi
exit "$status"
