// tpu_assert.svh: the block-invariant macros. Checked in simulation; compiled out under synthesis
// (Yosys defines SYNTHESIS). Each is checked at every rising clock edge out of reset, on the
// values the edge samples (the registers before it), and reports an $error naming the invariant
// (tpu_top.u_dma.u_dma.ReadDataOnlyWhenExpected: assertion ReadDataOnlyWhenExpected failed).
//   TPU_ASSERT(Name, expr)                 expr holds
//   TPU_ASSERT_IMPLIES(Name, ante, cons)   ante |-> cons, in the same cycle
//   TPU_ASSERT_SEQ(Name, property)         a temporal property (|=>, $past, $stable); needs --assert
// The first two are a test in a clocked process named after the invariant, not an assert
// statement: for a concurrent assertion the simulator (Verilator 5.006) copies every signal it
// reads into a sampled shadow on each evaluation (~5% of the chip model's time with 48 of them),
// and for an immediate one it marks the failure branch as the likely one (the error report's
// code then sits in the hot path: 5% of the chip model's instruction-cache misses), while a
// plain `if (...) $error` is emitted as an unlikely branch (docs/performance.md, "Simulation
// speed of the chip"). Only the temporal ones need the concurrent form.
`ifndef TPU_ASSERT_SVH
`define TPU_ASSERT_SVH
`ifndef SYNTHESIS
`define TPU_ASSERT(__name, __prop) \
  always_ff @(posedge clk_i or negedge rst_ni) begin : __name \
    if (rst_ni && !(__prop)) $error("assertion %s failed", `"__name`"); \
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
