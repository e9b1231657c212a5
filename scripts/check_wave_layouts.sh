#!/usr/bin/env bash
# check_wave_layouts.sh [BUILD]: every signal each layout of waves/ names exists in the dump it
# is meant for (GTKWave drops a missing name silently). The test a layout is for is the one its
# comment names (`make waves TEST=Suite.Name`); that test is rerun with WAVES=1 into a scratch
# directory and `tessera waves-layout --check` compares the layout with the dump. A multi-chip
# test's chip 0 dump is used. Exit 1 on the first layout that names a missing signal.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0
for layout in waves/*.gtkw; do
  test=$(grep -o 'TEST=[^ ]*' "$layout" | head -1 | cut -d= -f2)
  [ -n "$test" ] || { echo "$layout: names no test (make waves TEST=...)" >&2; status=1; continue; }
  bin=$(scripts/test_binary.sh "$build" "$test") ||
    { echo "$layout: no test binary holds $test" >&2; status=1; continue; }
  WAVES=1 TESSERA_WAVES_DIR="$scratch" "$bin" --gtest_filter="$test" > "$scratch/log" 2>&1 ||
    { echo "$layout: $test failed" >&2; cat "$scratch/log" >&2; status=1; continue; }
  fst="$scratch/${test//\//_}.fst"
  [ -f "$fst" ] || fst="$scratch/${test//\//_}_chip0.fst"
  [ -f "$fst" ] || { echo "$layout: $test wrote no dump" >&2; status=1; continue; }
  if "$build/bin/tessera" waves-layout "$fst" --layout "$layout" --out "$scratch/out.gtkw" --check; then
    echo "$layout: every signal is in $test's dump"
  else
    status=1
  fi
done
exit $status
