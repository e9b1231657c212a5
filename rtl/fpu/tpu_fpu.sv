// tpu_fpu: the scalar IEEE arithmetic block — fp32 add, bf16 x bf16 -> fp32 multiply, fp32 x
// fp32 multiply and the two bf16 <-> fp32 conversions side by side, purely combinational (zero
// latency, one result per op per evaluation). It is the verification top for tpu_fp_pkg, the
// functions every datapath instances, and the unit `tessera fpu-check` replays vector files
// through.
module tpu_fpu (
  // fp32 + fp32
  input  tpu_pkg::fp32_t add_a_i,      // addend (IEEE binary32 bits)
  input  tpu_pkg::fp32_t add_b_i,      // addend
  output tpu_pkg::fp32_t add_o,        // add_a_i + add_b_i, RNE
  // bf16 x bf16 -> fp32
  input  tpu_pkg::bf16_t mul_a_i,      // multiplicand (bfloat16 bits)
  input  tpu_pkg::bf16_t mul_b_i,      // multiplier
  output tpu_pkg::fp32_t mul_o,        // mul_a_i * mul_b_i, exact in range, RNE below it
  // fp32 x fp32
  input  tpu_pkg::fp32_t fmul_a_i,     // multiplicand (IEEE binary32 bits)
  input  tpu_pkg::fp32_t fmul_b_i,     // multiplier
  output tpu_pkg::fp32_t fmul_o,       // fmul_a_i * fmul_b_i, RNE
  // conversions
  input  tpu_pkg::fp32_t f2bf_i,       // fp32 to narrow
  output tpu_pkg::bf16_t f2bf_o,       // RNE to bf16
  input  tpu_pkg::bf16_t bf2f_i,       // bf16 to widen
  output tpu_pkg::fp32_t bf2f_o        // exact fp32
);
  assign add_o  = tpu_fp_pkg::fp32_add(add_a_i, add_b_i);
  assign mul_o  = tpu_fp_pkg::bf16_mul(mul_a_i, mul_b_i);
  assign fmul_o = tpu_fp_pkg::fp32_mul(fmul_a_i, fmul_b_i);
  assign f2bf_o = tpu_fp_pkg::fp32_to_bf16(f2bf_i);
  assign bf2f_o = tpu_fp_pkg::bf16_to_fp32(bf2f_i);
endmodule
