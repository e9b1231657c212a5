// tpu_assert.svh: the block-invariant macros. Checked in simulation when the model is built
// with --assert; compiled out under synthesis (Yosys defines SYNTHESIS). Each is checked at every
// rising clock edge out of reset, on the values the edge samples (the registers before it).
//   TPU_ASSERT(Name, expr)                 expr holds
//   TPU_ASSERT_IMPLIES(Name, ante, cons)   ante |-> cons, in the same cycle
//   TPU_ASSERT_SEQ(Name, property)         a temporal property (|=>, $past, $stable)
// The first two are immediate assertions in a clocked process: for a concurrent assertion the
// simulator (Verilator 5.006) copies every signal it reads into a sampled shadow on each
// evaluation (~5% of the chip model's time with 48 of them: docs/performance.md), while a
// clocked process already reads the values from before the edge. Only the temporal ones need
// the concurrent form.
`ifndef TPU_ASSERT_SVH
`define TPU_ASSERT_SVH
`ifndef SYNTHESIS
`define TPU_ASSERT(__name, __prop) \
  always_ff @(posedge clk_i or negedge rst_ni) begin \
    if (rst_ni) begin \
      __name: assert (__prop) else $error("assertion %s failed", `"__name`"); \
    end \
  end
`define TPU_ASSERT_IMPLIES(__name, __ante, __cons) \
  `TPU_ASSERT(__name, !(__ante) || (__cons))
`define TPU_ASSERT_SEQ(__name, __prop) \
  __name: assert property (@(posedge clk_i) disable iff (!rst_ni) (__prop)) \
    else $error("assertion %s failed", `"__name`");
`else
`define TPU_ASSERT(__name, __prop)
`define TPU_ASSERT_IMPLIES(__name, __ante, __cons)
`define TPU_ASSERT_SEQ(__name, __prop)
`endif
`endif
