// tpu_pkg: types and constants shared by every Tessera block. Numbers are raw IEEE-754 bit
// patterns (binary32 and bfloat16); all arithmetic on them lives in tpu_fp_pkg.
package tpu_pkg;

  typedef logic [15:0] bf16_t;  // bfloat16: 1 sign, 8 exponent, 7 fraction bits
  typedef logic [31:0] fp32_t;  // IEEE-754 binary32

  // The one canonical NaN every unit produces (contract 1 in the design brief).
  localparam fp32_t FP32_CANON_NAN = 32'h7FC0_0000;
  localparam bf16_t BF16_CANON_NAN = 16'h7FC0;

endpackage
