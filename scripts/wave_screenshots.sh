#!/usr/bin/env bash
# wave_screenshots.sh [BUILD] [OUT]: the screenshots of docs/testing.md ("Waveforms"), taken
# under a virtual display (Xvfb) — GTKWave opened on
#   1. the chip layout over a training step's conv phase: the example CNN on the rtl chip at
#      N = 16, step 0, cycles 3,000-3,020 of the step (inside fwd_conv1: the conv + relu +
#      max-pool of the first images), dumped with `tessera train --waves`;
#   2. an MXU unit test: make waves TEST=MxuMatmul/N4.BackToBackMatmulsShareThePipeline's dump
#      with waves/mxu.gtkw.
# Each layout is written for its dump by `tessera waves-layout` (filters, zoom, marker). PNGs go
# to OUT (default docs/img): waves_chip_conv.png, waves_mxu.png.
set -euo pipefail
build=${1:-build}
out=${2:-docs/img}
cd "$(dirname "$0")/.."
scripts/ensure_packages.sh xvfb x11-apps gtkwave imagemagick
tessera=$build/bin/tessera
[ -x "$tessera" ] || { echo "wave_screenshots: $tessera not built (make build)" >&2; exit 2; }
work=$(mktemp -d)
trap 'kill "${xvfb:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

# The dumps.
"$tessera" train --backend rtl --array 16 --batch 16 --steps 1 --no-progress --eval-samples 16 \
  --out "$work/run" --waves "$work/conv.fst" --waves-step 0 --from 3000 --to 3020 > "$work/train.log"
WAVES=1 TESSERA_WAVES_DIR="$work" "$build/tests/test_mxu_array" \
  --gtest_filter='MxuMatmul/N4.BackToBackMatmulsShareThePipeline' > "$work/mxu.log"
"$tessera" waves-layout "$work/MxuMatmul_N4.BackToBackMatmulsShareThePipeline.fst" \
  --layout waves/mxu.gtkw --out "$work/mxu.gtkw" > /dev/null

# The display: as large as the layouts' [size].
display=:$((90 + RANDOM % 9))
Xvfb "$display" -screen 0 1800x1000x24 -nolisten tcp &
xvfb=$!
sleep 2
shot() {  # shot FST LAYOUT PNG
  DISPLAY=$display gtkwave "$1" "$2" > "$work/gtkwave.log" 2>&1 &
  local g=$!
  sleep 8  # GTKWave loads the dump and runs the translate filter over every value shown
  DISPLAY=$display xwd -root -silent | /usr/bin/convert xwd:- "$3"
  kill "$g" 2>/dev/null || true
  wait "$g" 2>/dev/null || true
  echo "wrote $3"
}
mkdir -p "$out"
shot "$work/conv.fst" "$work/conv.gtkw" "$out/waves_chip_conv.png"
shot "$work/MxuMatmul_N4.BackToBackMatmulsShareThePipeline.fst" "$work/mxu.gtkw" \
  "$out/waves_mxu.png"
