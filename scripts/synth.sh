#!/usr/bin/env bash
# make synth: Yosys (generic gates, `synth`) on the arithmetic block, the divide / square-root
# unit, the processing element,
# the SRAM macros (64 x 64 bits), the unified buffer's 4-bank arbitration at 5 and 6 ports, the DMA (default parameters), the whole MXU at N = 4 (AccRows 16)
# and the chip top at N = 4 (latch check after proc). Fails on a parse
# error, on any latch, or on an undriven signal. Cell counts: <out>/<top>.stat; a summary is printed at the end.
# -defer: elaborate only at the requested parameters (without it Yosys first builds every module
# at its defaults, the array at N = 16, which takes minutes). -noshare: the resource-sharing
# pass spends minutes proving the MACs' shifters unshareable and changes no cell count.
set -euo pipefail
out=$(realpath -m "${1:-build/synth}")
cd "$(dirname "$0")/.."
mkdir -p "$out"
pkgs="rtl/pkg/tpu_pkg.sv rtl/fpu/tpu_fp_pkg.sv"
run() {  # name top "params" files...
  local name=$1 top=$2 params=$3; shift 3
  local chparam=""
  [ -n "$params" ] && chparam="chparam $params $top;"
  local start=$(date +%s)
  if ! yosys -q -l "$out/$name.log" -p "
      read_verilog -defer -sv -Irtl/pkg $pkgs $*;
      $chparam
      hierarchy -check -top $top;
      synth -noshare -top $top;
      select -assert-none t:\$_DLATCH* t:\$dlatch*;
      check -assert;
      tee -o $out/$name.stat stat" >/dev/null; then
    echo "synth FAILED: $name (log: $out/$name.log)" >&2
    grep -E "ERROR|Assert|latch" "$out/$name.log" | head -5 >&2
    return 1
  fi
  local cells=$(awk '/Number of cells:/ {n = $4} END {print n}' "$out/$name.stat")
  local flops=$(grep -cE '\$_(S?DFF|DFFE|SDFFE|SDFFCE|ADFF|ADFFE|DFFSR)[A-Z_]*' "$out/$name.stat" || true)
  printf '%-16s %9s cells  %4s s  no latches\n' "$name" "$cells" "$(( $(date +%s) - start ))"
  grep -E '^\s+\$_' "$out/$name.stat" > "$out/$name.cells" || true
}
run tpu_fpu tpu_fpu "" rtl/fpu/tpu_fpu.sv
run tpu_fp_divsqrt tpu_fp_divsqrt "" rtl/fpu/tpu_fp_divsqrt.sv
run tpu_mxu_pe tpu_mxu_pe "" rtl/mxu/tpu_mxu_pe.sv
run tpu_sram_sp tpu_sram_sp "-set Words 64 -set Elems 4 -set ElemW 16" rtl/mem/tpu_sram_sp.sv
run tpu_sram_dp tpu_sram_dp "-set Words 64 -set Elems 4 -set ElemW 16" rtl/mem/tpu_sram_dp.sv
run tpu_dma tpu_dma "" rtl/dma/tpu_dma_agen.sv rtl/dma/tpu_dma_fifo.sv rtl/dma/tpu_dma.sv
run tpu_vpu_lane tpu_vpu_lane "" rtl/pkg/tpu_isa_pkg.sv rtl/vpu/tpu_vpu_pkg.sv rtl/vpu/tpu_vpu_lane.sv
# The unified buffer's arbitration at the chip's 6 requester ports (the MXU's weight reader has
# its own) and at 5 (one shared MXU port): 4 banks of 32-byte words, 16 words (tiny macros, so
# the difference is the arbiters and the read-data muxes).
for p in 6 7; do
  run tpu_ub_ports$p tpu_sram_banked \
    "-set Banks 4 -set Words 16 -set Elems 32 -set ElemW 8 -set Ports $p -set FirstPort 2 -set CheckUnwritten 0" \
    rtl/mem/tpu_sram_sp.sv rtl/mem/tpu_sram_banked.sv
done
run tpu_mxu_n4 tpu_mxu "-set N 4 -set AccRows 16" \
  rtl/mem/tpu_sram_dp.sv rtl/mxu/tpu_mxu_array.sv rtl/mxu/tpu_mxu_acc_mem.sv rtl/mxu/tpu_mxu.sv
# The whole chip at N = 4 (small memories: UB 1 KiB, 16 ACC rows, queues of 2): elaborated and
# processed (`proc`) with every module, checked for latches and undriven signals. Full gate-level
# synthesis of the top is not part of make synth yet (docs/performance.md).
top_check() {
  local start=$(date +%s)
  if ! yosys -q -l "$out/tpu_top_n4.log" -p "
      read_verilog -defer -sv -Irtl/pkg -DSYNTHESIS $(grep ^rtl/ rtl/tpu.f | tr '\n' ' ');
      chparam -set N 4 -set UbBytes 1024 -set AccRows 16 -set QDepth 2 tpu_top;
      hierarchy -check -top tpu_top;
      proc; opt_clean;
      select -assert-none t:\$dlatch* t:\$_DLATCH*;
      check -assert" >/dev/null; then
    echo "synth FAILED: tpu_top_n4 (log: $out/tpu_top_n4.log)" >&2
    grep -E "ERROR|Assert|latch" "$out/tpu_top_n4.log" | head -5 >&2
    return 1
  fi
  printf '%-16s %9s        %4s s  no latches (proc level)\n' tpu_top_n4 "-" "$(( $(date +%s) - start ))"
}
top_check
echo "cell breakdowns: $out/*.stat"
