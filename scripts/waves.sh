#!/usr/bin/env bash
# make waves TEST=Suite.Name: finds the test binary that holds the test, reruns that one test
# with WAVES=1 (FST to build/waves/<Suite.Name>.fst, '/' -> '_'), and opens it in GTKWave with
# the block's layout from waves/, written for the dump by `tessera waves-layout`: bus widths as
# the dump declares them (they depend on the array size N), the translate filters (numbers as
# numbers, instructions as assembly, HBM commands by name), zoomed to the dump, the marker on
# the first event. make waves RUN=FILE.fst: a dump of `tessera run/train --waves`, with the
# layout written beside it. Without a display it prints the command to run instead.
set -euo pipefail
build=${1:-build}
test=${2:-}
run=${3:-}
cd "$(dirname "$0")/.."

open_dump() {  # open_dump FST LAYOUT
  echo "waveform: $1"
  echo "layout:   $2"
  if [ -n "${DISPLAY:-}" ]; then
    gtkwave "$1" "$2" >/dev/null 2>&1 &
  else
    echo "no display: open it with  gtkwave $1 $2"
  fi
}

if [ -n "$run" ]; then
  [ -f "$run" ] || { echo "make waves: RUN=$run: no such dump" >&2; exit 2; }
  layout="${run%.fst}.gtkw"
  [ -f "$layout" ] || "$build/bin/tessera" waves-layout "$run" --out "$layout" >/dev/null
  open_dump "$run" "$layout"
  exit 0
fi

if [ -z "$test" ]; then
  echo "usage: make waves TEST=Suite.Name | RUN=FILE.fst   (valid test names below)" >&2
  scripts/test_binary.sh "$build" | awk '{print "  " $2}' >&2
  exit 2
fi
if ! bin=$(scripts/test_binary.sh "$build" "$test"); then
  echo "make waves: no test named '$test'. Valid names:" >&2
  scripts/test_binary.sh "$build" | awk '{print "  " $2}' >&2
  exit 2
fi

case "$(basename "$bin")" in
  test_mxu_pe) layout=waves/mxu_pe.gtkw ;;
  test_mxu_*) layout=waves/mxu.gtkw ;;
  test_hbm_ctrl) layout=waves/hbm_ctrl.gtkw ;;
  test_hbm) layout=waves/hbm.gtkw ;;
  test_chip | test_systemc) layout=waves/chip.gtkw ;;
  test_ici) layout=waves/ici.gtkw ;;
  test_ring) layout=waves/ring.gtkw ;;
  *) layout=waves/fpu.gtkw ;;
esac

fst="$build/waves/${test//\//_}.fst"
rm -f "$fst" "${fst%.fst}"_chip*.fst
WAVES=1 TESSERA_WAVES_DIR="$build/waves" "$bin" --gtest_filter="$test"
# A multi-chip test dumps one FST per chip (<test>_chip<r>.fst): open chip 0, list the others.
if [ ! -f "$fst" ] && [ -f "${fst%.fst}_chip0.fst" ]; then
  for f in "${fst%.fst}"_chip*.fst; do echo "chip waveform: $f"; done
  fst="${fst%.fst}_chip0.fst"
fi
if [ ! -f "$fst" ]; then
  echo "make waves: $test ran but wrote no waveform (it drives no RTL model)" >&2
  exit 1
fi

save="$build/waves/${test//\//_}.gtkw"
"$build/bin/tessera" waves-layout "$fst" --layout "$layout" --out "$save" >/dev/null
echo "layout from $layout"
open_dump "$fst" "$save"
