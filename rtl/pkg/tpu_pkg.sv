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

endpackage
