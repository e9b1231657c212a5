// tpu_reg_slice: a full-throughput register slice (skid buffer) for one valid/ready channel.
// Every output is a register: out_valid_o / out_data_o come from the output stage, in_ready_o
// is "the skid entry is empty". No combinational path crosses the slice in either direction,
// so a chip-boundary port behind one (the host port, tpu_top) reaches no logic inside the chip
// within a cycle — timing closure at the pins, and in the verilated model the logic behind the
// port is not re-evaluated when the harness changes an input (docs/performance.md). Latency:
// one cycle; throughput: one transfer a cycle (the skid entry takes the one transfer accepted
// while the output stage stalls).
`include "tpu_assert.svh"

module tpu_reg_slice #(
  parameter int unsigned Width = 8
) (
  input  logic             clk_i,
  input  logic             rst_ni,
  // upstream
  input  logic             in_valid_i,
  output logic             in_ready_o,      // registered: the skid entry is empty
  input  logic [Width-1:0] in_data_i,
  // downstream
  output logic             out_valid_o,     // registered
  input  logic             out_ready_i,
  output logic [Width-1:0] out_data_o       // registered, valid with out_valid_o
);
  logic             skid_v_q;
  logic [Width-1:0] skid_q;

  assign in_ready_o = !skid_v_q;

  // The output stage is free this cycle when it is empty or its transfer completes; it then
  // takes the skid entry first (older), else the input. Otherwise an accepted input waits in
  // the skid entry.
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      out_valid_o <= 1'b0;
      skid_v_q    <= 1'b0;
    end else if (!out_valid_o || out_ready_i) begin
      out_valid_o <= skid_v_q || in_valid_i;
      skid_v_q    <= 1'b0;
    end else if (in_valid_i && !skid_v_q) begin
      skid_v_q <= 1'b1;
    end
  end

  // Data: no reset (meaningful only with the valid bits above).
  always_ff @(posedge clk_i) begin
    if (!out_valid_o || out_ready_i) begin
      if (skid_v_q) out_data_o <= skid_q;
      else if (in_valid_i) out_data_o <= in_data_i;
    end else if (in_valid_i && !skid_v_q) begin
      skid_q <= in_data_i;
    end
  end

  `TPU_ASSERT_NEXT(HoldWhileStalled, out_valid_o && !out_ready_i, out_valid_o)
endmodule
