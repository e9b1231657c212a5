// tpu_pkg: types and constants shared by every Tessera block. Numbers are raw IEEE-754 bit
// patterns (binary32 and bfloat16); all arithmetic on them lives in tpu_fp_pkg.
package tpu_pkg;

  typedef logic [15:0] bf16_t;  // bfloat16: 1 sign, 8 exponent, 7 fraction bits
  typedef logic [31:0] fp32_t;  // IEEE-754 binary32

  // The one canonical NaN every unit produces (contract 1 in the design brief).
  localparam fp32_t FP32_CANON_NAN = 32'h7FC0_0000;
  localparam bf16_t BF16_CANON_NAN = 16'h7FC0;

  // DMA fault codes (rtl/dma/tpu_dma.sv fault_code_o; docs/memory.md).
  localparam logic [3:0] DMA_FAULT_NONE      = 4'd0;
  localparam logic [3:0] DMA_FAULT_SRC_RANGE = 4'd1;  // a source address out of its space
  localparam logic [3:0] DMA_FAULT_DST_RANGE = 4'd2;  // a destination address out of its space
  localparam logic [3:0] DMA_FAULT_COUNT     = 4'd3;  // source and destination counts differ
  localparam logic [3:0] DMA_FAULT_ELEM_SIZE = 4'd4;  // element size not 2 or 4 bytes
  localparam logic [3:0] DMA_FAULT_ALIGN     = 4'd5;  // an element address not size-aligned

  // Chip configurations (docs/architecture.md). This package is the one source of every chip
  // parameter the host also needs: CMake generates build/generated/tessera/chip_params.h from
  // the `localparam` lines (keep each on one line: `localparam <type> NAME = VALUE;`) and builds
  // the Verilator models with these values (sim/CMakeLists.txt).
  // The full chip (tpu_top's defaults; the N = 16 Verilator builds).
  localparam int unsigned CHIP_N           = 16;      // MXU size = VPU lanes
  localparam int unsigned CHIP_UB_BYTES    = 65536;   // unified buffer
  localparam int unsigned CHIP_ACC_ROWS    = 1024;    // accumulator rows of N fp32
  // The small chip the unit and chip tests run (the N = 4 Verilator builds).
  localparam int unsigned SMALL_N          = 4;
  localparam int unsigned SMALL_UB_BYTES   = 8192;
  localparam int unsigned SMALL_ACC_ROWS   = 64;
  // The functional backend's chip for an array size no Verilator build has.
  localparam int unsigned LARGE_UB_BYTES   = 262144;
  localparam int unsigned LARGE_ACC_ROWS   = 1024;
  // Sequencer.
  localparam int unsigned QUEUE_DEPTH      = 32;      // per-unit instruction queues
  localparam int unsigned FETCH_DEPTH      = 64;      // instructions fetched ahead
  localparam int unsigned ICI_LINK_BYTES   = 16;      // bytes an ICI link carries per cycle
  localparam int unsigned DMA_READ_SLOTS   = 8;       // source words a DMA copy keeps (tpu_dma)

  // HBM2 pseudo-channel geometry: 4 bank groups x 4 banks x 16 Ki rows of 1 KiB = 256 MiB, a
  // 64-bit bus, BL4 = one 32-byte burst in 2 cycles.
  localparam int unsigned HBM_BANK_GROUPS  = 4;
  localparam int unsigned HBM_BANKS_PER_GROUP = 4;
  localparam int unsigned HBM_ROW_BYTES    = 1024;
  localparam int unsigned HBM_PC_WIDTH_BITS = 64;
  localparam int unsigned HBM_BURST_LENGTH = 4;
  localparam int unsigned HBM_BURST_CYCLES = 2;
  localparam int unsigned HBM_PC_ADDR_BITS = 28;      // byte address bits of one pseudo-channel
  localparam longint unsigned HBM_PC_BYTES = 64'd268435456;  // 1 << HBM_PC_ADDR_BITS

  // HBM2 timing in command-clock cycles (tCK 1 ns): the design brief's baseline (2000 Mb/s;
  // single-bank refresh values of Ramulator 2's HBM2_2Gbps preset). tpu_hbm_ctrl's defaults.
  localparam int unsigned HBM_CL     = 14;    // RD to first read data
  localparam int unsigned HBM_CWL    = 4;     // WR to first write data
  localparam int unsigned HBM_TRCD   = 14;
  localparam int unsigned HBM_TRP    = 14;
  localparam int unsigned HBM_TRAS   = 34;
  localparam int unsigned HBM_TRC    = 48;
  localparam int unsigned HBM_TWR    = 16;    // from the end of write data
  localparam int unsigned HBM_TRTP   = 5;
  localparam int unsigned HBM_TCCD_S = 2;
  localparam int unsigned HBM_TCCD_L = 4;
  localparam int unsigned HBM_TRRD_S = 4;
  localparam int unsigned HBM_TRRD_L = 4;
  localparam int unsigned HBM_TFAW   = 16;
  localparam int unsigned HBM_TWTR_S = 6;     // from the end of write data
  localparam int unsigned HBM_TWTR_L = 8;
  localparam int unsigned HBM_TREFI  = 3900;
  localparam int unsigned HBM_TRFC   = 260;
  localparam int unsigned HBM_TRFCSB = 160;   // REFSB to ACT, same bank
  localparam int unsigned HBM_TRREFD = 8;     // REFSB to REFSB or ACT, any bank
  // The tests' distinct set (the Vtpu_hbm_ctrl_alt build, hbm::HbmTiming::alternate()): every
  // value unlike the baseline's and unlike each other, tRC > tRAS + tRP, tFAW > 4 x tRRD_S, and a
  // short tREFI, so a rule or counter that reads the wrong parameter cannot pass.
  localparam int unsigned HBM_ALT_CL     = 17;
  localparam int unsigned HBM_ALT_CWL    = 5;
  localparam int unsigned HBM_ALT_TRCD   = 13;
  localparam int unsigned HBM_ALT_TRP    = 11;
  localparam int unsigned HBM_ALT_TRAS   = 29;
  localparam int unsigned HBM_ALT_TRC    = 43;
  localparam int unsigned HBM_ALT_TWR    = 19;
  localparam int unsigned HBM_ALT_TRTP   = 7;
  localparam int unsigned HBM_ALT_TCCD_S = 3;
  localparam int unsigned HBM_ALT_TCCD_L = 6;
  localparam int unsigned HBM_ALT_TRRD_S = 4;
  localparam int unsigned HBM_ALT_TRRD_L = 9;
  localparam int unsigned HBM_ALT_TFAW   = 23;
  localparam int unsigned HBM_ALT_TWTR_S = 8;
  localparam int unsigned HBM_ALT_TWTR_L = 10;
  localparam int unsigned HBM_ALT_TREFI  = 200;
  localparam int unsigned HBM_ALT_TRFC   = 37;
  localparam int unsigned HBM_ALT_TRFCSB = 31;
  localparam int unsigned HBM_ALT_TRREFD = 12;

endpackage
