// tpu_assert.svh: the block-invariant macros. Checked in simulation; compiled out under synthesis
// (Yosys defines SYNTHESIS). Each is checked at every rising clock edge out of reset, on the
// values the edge samples (the registers before it), and reports an $error naming the invariant
// (tpu_top.u_dma.u_dma.ReadDataOnlyWhenExpected: assertion ReadDataOnlyWhenExpected failed).
//   TPU_ASSERT(Name, expr)                 expr holds
//   TPU_ASSERT_IMPLIES(Name, ante, cons)   ante |-> cons, in the same cycle
//   TPU_ASSERT_NEXT(Name, ante, cons)      ante |=> cons: cons holds the cycle after ante
//   TPU_ASSERT_HELD(Name, valid, ready, value)
//                                          valid && !ready |=> valid && $stable(value): an
//                                          offer not taken is made again, unchanged
//   TPU_ASSERT_SEQ(Name, property)         any other temporal property (concurrent; --assert)
// All but the last are a test in a clocked process named after the invariant, not an assert
// statement (the one-cycle ones keep what they need of the cycle before in registers named
// Name_armed_q and Name_value_q): for a concurrent assertion the simulator (Verilator 5.006)
// copies every signal it reads into a sampled shadow on each evaluation (~5% of the chip
// model's time with 48 of them), and for both kinds it marks the failure branch as the likely
// one (the error report's code then sits in the hot path: 5% of the chip model's
// instruction-cache misses), while a plain `if (...) $error` is emitted as an unlikely branch
// (docs/performance.md, "Simulation speed of the chip").
`ifndef TPU_ASSERT_SVH
`define TPU_ASSERT_SVH
`ifndef SYNTHESIS
// The one report every form gives (the process's scope names the block).
`define TPU_ASSERT_REPORT(__name) $error("assertion %s failed", `"__name`")
`define TPU_ASSERT(__name, __prop) \
  always_ff @(posedge clk_i or negedge rst_ni) begin : __name \
    if (rst_ni && !(__prop)) `TPU_ASSERT_REPORT(__name); \
  end
`define TPU_ASSERT_IMPLIES(__name, __ante, __cons) \
  `TPU_ASSERT(__name, !(__ante) || (__cons))
`define TPU_ASSERT_NEXT(__name, __ante, __cons) \
  logic __name``_armed_q; \
  always_ff @(posedge clk_i or negedge rst_ni) begin : __name \
    if (!rst_ni) begin \
      __name``_armed_q <= 1'b0; \
    end else begin \
      if (__name``_armed_q && !(__cons)) `TPU_ASSERT_REPORT(__name); \
      __name``_armed_q <= (__ante); \
    end \
  end
// An offer not taken must come again with the value held in Name_value_q.
`define TPU_ASSERT_HELD(__name, __valid, __ready, __value) \
  logic [$bits(__value)-1:0] __name``_value_q; \
  always_ff @(posedge clk_i) begin \
    if ((__valid) && !(__ready)) __name``_value_q <= (__value); \
  end \
  `TPU_ASSERT_NEXT(__name, (__valid) && !(__ready), (__valid) && (__value) == __name``_value_q)
`define TPU_ASSERT_SEQ(__name, __prop) \
  __name: assert property (@(posedge clk_i) disable iff (!rst_ni) (__prop)) \
    else `TPU_ASSERT_REPORT(__name);
`else
`define TPU_ASSERT(__name, __prop)
`define TPU_ASSERT_IMPLIES(__name, __ante, __cons)
`define TPU_ASSERT_NEXT(__name, __ante, __cons)
`define TPU_ASSERT_HELD(__name, __valid, __ready, __value)
`define TPU_ASSERT_SEQ(__name, __prop)
`endif
`endif
