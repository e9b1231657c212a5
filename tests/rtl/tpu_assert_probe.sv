// tpu_assert_probe: the one-cycle invariant macros (rtl/pkg/tpu_assert.svh) with their operands
// on input pins, so that tests/rtl/test_assert.cc can break and keep each property at will.
`include "tpu_assert.svh"

module tpu_assert_probe (
  input logic       clk_i,
  input logic       rst_ni,
  input logic       ante_i,     // TPU_ASSERT_NEXT: ante_i |=> cons_i
  input logic       cons_i,
  input logic       valid_i,    // TPU_ASSERT_HELD: an offer not taken comes again, unchanged
  input logic       ready_i,
  input logic [7:0] value_i
);
  `TPU_ASSERT_NEXT(ProbeNext, ante_i, cons_i)
  `TPU_ASSERT_HELD(ProbeHeld, valid_i, ready_i, value_i)
endmodule
