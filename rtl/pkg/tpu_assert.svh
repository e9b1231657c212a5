// tpu_assert.svh: the TPU_ASSERT macro for block invariants. Checked in simulation when the
// model is built with --assert; compiled out under synthesis (Yosys defines SYNTHESIS).
`ifndef TPU_ASSERT_SVH
`define TPU_ASSERT_SVH
`ifndef SYNTHESIS
`define TPU_ASSERT(__name, __prop) \
  __name: assert property (@(posedge clk_i) disable iff (!rst_ni) (__prop)) \
    else $error("assertion %s failed", `"__name`");
`else
`define TPU_ASSERT(__name, __prop)
`endif
`endif
