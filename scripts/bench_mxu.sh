#!/usr/bin/env bash
# make bench: for N = 8, 16, 32, 64, 128 (override with BENCH_NS="..."), builds the MXU model
# from scratch (Verilator + C++ compile, ccache off, timed: verilator_build_s) and measures its
# single-threaded simulation speed (bench/mxu_sim_speed.cc). Results: <out>/mxu.json, a JSON
# array of {"name", "value", "unit", "params"}. The C++ compiler is the build's (clang++ when
# installed, as CMakeLists.txt picks it; BENCH_CXX=g++ to compare): ~1.16x the PE-cycles a second
# of GCC 12's code at N = 16 (docs/performance.md). Each N is built twice: the RTL (arith "rtl")
# and the host-arithmetic simulation flavour (arith "host": +define+TPU_SIM_HOST_ARITH, the MAC
# on the host's IEEE unit, docs/numerics.md "Two builds of the same chip"); BENCH_ARITHS="rtl"
# for one.
set -euo pipefail
out=$(realpath -m "${1:-build/bench}")
cd "$(dirname "$0")/.."
mkdir -p "$out"
ns=${BENCH_NS:-"8 16 32 64 128"}
jobs=${BENCH_BUILD_JOBS:-2}
cxx=${BENCH_CXX:-$(command -v clang++ || echo g++)}
rows=()
ariths=${BENCH_ARITHS:-"rtl host"}
for n in $ns; do
 for arith in $ariths; do
  obj="$out/obj_n$n"
  flavour=()
  cflags="-DMXU_N=$n -I$PWD -std=c++17"
  if [ "$arith" = host ]; then
    obj="$out/obj_n${n}_host"
    flavour=(-DTPU_SIM_HOST_ARITH)
    cflags="$cflags -include $PWD/sim/host_arith.h"
  fi
  rm -rf "$obj"
  start=$(date +%s.%N)
  CCACHE_DISABLE=1 verilator --cc --exe --build -j "$jobs" -O3 --x-assign fast --x-initial fast \
    --unroll-count 4096 --unroll-stmts 100 -Wno-fatal "${flavour[@]}" \
    -Irtl/pkg rtl/lint.vlt -f rtl/tpu.f --top-module tpu_mxu --prefix Vtpu_mxu \
    -GN="$n" -GAccRows=256 -MAKEFLAGS "OPT_FAST=-O2 CXX=$cxx LINK=$cxx" \
    -CFLAGS "$cflags" \
    --Mdir "$obj" -o mxu_sim_speed "$PWD/bench/mxu_sim_speed.cc" >"$obj.build.log" 2>&1 ||
    { echo "bench: build of N=$n ($arith) failed, see $obj.build.log" >&2; exit 1; }
  build_s=$(echo "$(date +%s.%N) - $start" | bc)
  cpp_bytes=$(cat "$obj"/*.cpp "$obj"/*.h | wc -c)
  rows+=("{\"name\": \"verilator_build_s\", \"value\": $build_s, \"unit\": \"s\", \"params\": {\"arith\": \"$arith\", \"n\": $n, \"jobs\": $jobs, \"cxx\": \"$(basename "$cxx")\"}}")
  rows+=("{\"name\": \"verilated_cpp_bytes\", \"value\": $cpp_bytes, \"unit\": \"bytes\", \"params\": {\"arith\": \"$arith\", \"n\": $n}}")
  while IFS= read -r line; do
    rows+=("${line/\"params\": \{/\"params\": {\"arith\": \"$arith\", }")
  done < <("$obj/mxu_sim_speed")
  printf 'N=%-4s %-4s build %6.1f s (%s)  ' "$n" "$arith" "$build_s" "$(basename "$cxx")"
  printf '%s\n' "${rows[@]}" | grep '"mxu_pe_cycles_per_s"' | tail -1 |
    sed -E 's/.*"value": ([0-9.]+).*/\1/' | awk '{printf "%.1f M PE-cycles per CPU-second\n", $1 / 1e6}'
 done
done
{
  echo "["
  for i in "${!rows[@]}"; do
    sep=","; [ "$i" -eq $(( ${#rows[@]} - 1 )) ] && sep=""
    echo "  ${rows[$i]}$sep"
  done
  echo "]"
} > "$out/mxu.json"
echo "results: $out/mxu.json"
