#!/usr/bin/env bash
# make lint: verilator --lint-only -Wall on every RTL top (and the MXU at its smallest and
# largest N, since parameters change widths; the chip also in its host-arithmetic simulation
# flavour, +define+TPU_SIM_HOST_ARITH), and parameter sets the RTL must refuse at elaboration
# with a named message. Waivers live only in rtl/lint.vlt. Then scripts/check_chip_constants.sh:
# the host's C++ copies no chip parameter by hand (they come from the generated chip_params.h).
set -euo pipefail
cd "$(dirname "$0")/.."
tops=(
  "tpu_fpu"
  "tpu_fp_divsqrt"
  "tpu_mxu_pe"
  "tpu_dma_agen"
  "tpu_dma"
  "tpu_dma_unit"
  "tpu_ici_port"
  "tpu_ici_port -GFlitW=64 -GLinkBytes=64 -GCredits=2"
  "tpu_dma -GSramBytes=8192 -GHbmBytes=64'd1048576 -GMaxReads=4 -GElemDepth=8"
  "tpu_hbm_ctrl"
  "tpu_hbm_ctrl -GQueueDepth=12 -GRespDepth=5 -GRowHitCap=3 -GCL=17 -GCWL=5 -GTCCD_S=3"
  "tpu_hbm_ctrl -GIdW=9 -GOrderById=0"
  "tpu_hbm_ctrl -GRefPerBank=0 -GTREFI=200 -GTRFC=37"
  "tpu_seq"
  "tpu_csr"
  "tpu_top -GN=4 -GUbBytes=8192 -GAccRows=64"
  "tpu_top"
  "tpu_top -DTPU_SIM_HOST_ARITH"
  "tpu_top -GN=128 -GUbBytes=262144 -GAccRows=1024 -DTPU_SIM_HOST_ARITH"
  "tpu_vpu"
  "tpu_vpu_lane"
  "tpu_vpu -GN=4 -GUbBytes=4096 -GAccRows=64"
  "tpu_seq -GN=4 -GQDepth=2 -GFetchDepth=64"
  "tpu_hbm"
  "tpu_hbm -GChannels=4 -GPorts=4"
  "tpu_hbm -GChannels=16 -GPorts=3 -GPcLsb=2 -GRobDepth=16 -GWtDepth=4"
  "tpu_sram_sp -GWords=64 -GElems=4 -GElemW=16"
  "tpu_sram_dp -GWords=1024 -GElems=8 -GElemW=16"
  "tpu_sram_banked"
  "tpu_ub_port -GN=4 -GUbBytes=4096"
  "tpu_ub_port"
  "tpu_ub_port -GN=128"
  "tpu_sram_banked -GBanks=1 -GPorts=1"
  "tpu_mxu -GN=4 -GAccRows=16"
  "tpu_mxu -GN=16 -GAccRows=256"
  "tpu_mxu -GN=128 -GAccRows=512"
  "tpu_mxu_unit -GN=4 -GUbBytes=8192 -GAccRows=64"
  "tpu_mxu_unit -GN=16 -GUbBytes=65536 -GAccRows=256"
  "tpu_mxu_unit -GN=128 -GUbBytes=262144 -GAccRows=1024"
)
# Parameter sets the RTL must refuse at elaboration, each with the message it must give.
refused=(
  "tpu_hbm_ctrl -GMinDrain=0|MinDrain 0 out of range"
  "tpu_hbm_ctrl -GMinDrain=256|MinDrain 256 out of range"
  "tpu_hbm_ctrl -GQueueDepth=12 -GPrepDepth=13|PrepDepth 13 > QueueDepth 12"
  "tpu_hbm_ctrl -GRefUrgent=0|RefUrgent 0 (1..255)"
  "tpu_hbm_ctrl -GQueueDepth=33|QueueDepth 33 > 32"
)
fail=0
for r in "${refused[@]}"; do
  set -- ${r%%|*}
  want=${r#*|}
  if log=$(verilator --lint-only -Wall rtl/lint.vlt -f rtl/tpu.f --top-module "$@" 2>&1); then
    echo "lint FAILED: $* was accepted (want: $want)"
    fail=1
  elif [[ $log != *"$want"* ]]; then
    echo "lint FAILED: $* refused without \"$want\":"
    echo "$log" | head -5
    fail=1
  else
    echo "lint ok: $* refused ($want)"
  fi
done
# The host's C++ takes every chip parameter from the headers generated from the RTL packages.
scripts/check_chip_constants.sh --self-test || fail=1
scripts/check_chip_constants.sh || fail=1
for t in "${tops[@]}"; do
  set -- $t
  if verilator --lint-only -Wall rtl/lint.vlt -f rtl/tpu.f --top-module "$@"; then
    echo "lint ok: $t"
  else
    echo "lint FAILED: $t"
    fail=1
  fi
done
exit $fail
