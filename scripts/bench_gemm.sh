#!/usr/bin/env bash
# make bench (GEMM part, docs/performance.md "GEMM"): bf16 x bf16 -> fp32 GEMMs HBM to HBM on
# the rtl chip at N = 16 (host-arithmetic build), compiled by the step compiler's tiled matmul
# (build/bin/gemm_bench, bench/gemm.cc: every result checked against the functional model bit
# for bit and the exact product within the fp32 summation bound). Shapes: square 256, 512,
# 1024 (BENCH_GEMM_LARGE=1 adds 2048); skinny; the example CNN's and the MLP's layer GEMMs.
# Cycles are exact; utilization = M K Nc / (N^2 cycles). Writes <out>/gemm.json (one object a
# line).
set -euo pipefail
out=$(realpath -m "${1:-build/bench}")
cd "$(dirname "$0")/.."
bin=${GEMM_BENCH_BIN:-build/bin/gemm_bench}
[ -x "$bin" ] || { echo "bench_gemm: $bin not built" >&2; exit 1; }
mkdir -p "$out"
: > "$out/gemm.json"
shapes=(
  "256 256 256 square_256"
  "512 512 512 square_512"
  "1024 1024 1024 square_1024"
  "8192 256 16 skinny_8192x256x16"
  "86528 16 32 cnn_conv1_forward"      # 128 images x 26 x 26 outputs, 3x3 taps padded to 16
  "128 5408 16 cnn_dense_forward"      # 5408 = 13 x 13 x 32 inputs, 10 units padded to 16
  "16 128 5408 cnn_dense_weight_grad"  # dW^T = dz^T x over the batch of 128
  "128 784 256 mlp_dense1_forward"
)
[ "${BENCH_GEMM_LARGE:-0}" = 1 ] && shapes+=("2048 2048 2048 square_2048")
for s in "${shapes[@]}"; do
  read -r m k nc name <<< "${s%%#*}"
  "$bin" 16 "$m" "$k" "$nc" host "$name" | tee -a "$out/gemm.json"
done
