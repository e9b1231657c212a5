// tpu_mxu_acc_mem: the accumulator memory, Rows entries of N fp32 words. One write port and one
// read port per cycle (a two-port SRAM macro): read data is registered and appears the cycle
// after rd_en_i; a read of the row being written in the same cycle returns the old contents.
module tpu_mxu_acc_mem #(
  parameter int unsigned N    = 16,                 // words per row (array columns)
  parameter int unsigned Rows = 256,                // rows
  localparam int unsigned AddrW = $clog2(Rows)
) (
  input  logic             clk_i,
  // write port
  input  logic             wr_en_i,                 // write wr_row_i at wr_addr_i this cycle
  input  logic [AddrW-1:0] wr_addr_i,
  input  logic [32*N-1:0]  wr_row_i,                // N fp32 words, word c at bits 32c
  // read port
  input  logic             rd_en_i,                 // read rd_addr_i this cycle
  input  logic [AddrW-1:0] rd_addr_i,
  output logic [32*N-1:0]  rd_row_o                 // valid the cycle after rd_en_i
);
  logic [32*N-1:0] mem_q [Rows];

  always_ff @(posedge clk_i) begin
    if (rd_en_i) rd_row_o <= mem_q[rd_addr_i];
    if (wr_en_i) mem_q[wr_addr_i] <= wr_row_i;
  end
endmodule
