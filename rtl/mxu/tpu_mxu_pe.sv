// tpu_mxu_pe: one weight-stationary processing element. It holds two bf16 weights (banks 0
// and 1); each activation arrives with a bank tag, is multiplied by that bank's weight and the
// product is added to the partial sum from the PE above (psum_i + act * w, two IEEE roundings,
// tpu_fp_pkg::mac). Activation and tag pass right, the partial sum passes down, each after one
// register: latency 1 cycle, one MAC per cycle. A weight write (bank, value) lands at the clock
// edge, after this cycle's MAC has read the old value, so a tile's weights can stream in
// behind the previous tile's last activation. tpu_mxu_array implements N x N
// copies of exactly this behaviour in rolled loops (for simulation speed, docs/performance.md);
// this module is the single-PE form for synthesis and for the PE unit test.
module tpu_mxu_pe (
  input  logic           clk_i,
  input  logic           rst_ni,
  input  logic           en_i,          // clock enable: the array is streaming
  // activation path (from the left)
  input  tpu_pkg::bf16_t act_i,         // activation arriving this cycle
  input  logic           act_bank_i,    // weight bank this activation uses
  output tpu_pkg::bf16_t act_o,         // registered, to the PE on the right
  output logic           act_bank_o,
  // partial sums (from above, to below)
  input  tpu_pkg::fp32_t psum_i,        // running column sum from the PE above
  output tpu_pkg::fp32_t psum_o,        // registered psum_i + act_i * weight
  // weight loading (from the array's column-skewed weight bus)
  input  logic           wload_valid_i, // write this PE's weight at this edge
  input  logic           wload_bank_i,  // bank it is written to
  input  tpu_pkg::bf16_t wload_data_i   // the weight
);
  tpu_pkg::bf16_t weight_q [2];

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      act_o      <= '0;
      act_bank_o <= 1'b0;
      psum_o     <= '0;
    end else begin
      if (en_i) begin
        act_o      <= act_i;
        act_bank_o <= act_bank_i;
        psum_o     <= tpu_fp_pkg::mac(psum_i, act_i, weight_q[act_bank_i]);
      end
    end
  end

  // Weights are data, not control: no reset (as in an SRAM-backed weight buffer).
  always_ff @(posedge clk_i) begin
    if (wload_valid_i) weight_q[wload_bank_i] <= wload_data_i;
  end
endmodule
