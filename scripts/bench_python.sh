#!/usr/bin/env bash
# make bench (Python part, docs/python.md): the Python path's cost over the C++ trainer —
# bench/python_overhead.py (per-step overhead on the functional backend; images per wall second
# of fit over a tessera.data pipeline against `tessera train` on the rtl chip). Writes
# <out>/python.json. BENCH_PY_STEPS (default 40), BENCH_PY_RTL_STEPS (4), BENCH_PY_REPS (3).
set -euo pipefail
out=$(realpath -m "${1:-build/bench}")
build=$(realpath -m "${2:-build}")
cd "$(dirname "$0")/.."
mkdir -p "$out"
PYTHONPATH="$PWD/python:$build/python" /usr/bin/python3 bench/python_overhead.py \
  "$out/python.json" "$build/bin/tessera" "${BENCH_PY_STEPS:-40}" "${BENCH_PY_RTL_STEPS:-4}" \
  "${BENCH_PY_REPS:-3}" | tee "$out/python.log"
