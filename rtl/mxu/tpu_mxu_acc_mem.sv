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
  input  tpu_pkg::fp32_t   wr_row_i [N],
  // read port
  input  logic             rd_en_i,                 // read rd_addr_i this cycle
  input  logic [AddrW-1:0] rd_addr_i,
  output tpu_pkg::fp32_t   rd_row_o [N]             // valid the cycle after rd_en_i
);
  tpu_pkg::fp32_t mem_q [Rows][N];

  always_ff @(posedge clk_i) begin
    if (rd_en_i) rd_row_o <= mem_q[rd_addr_i];
    if (wr_en_i) mem_q[wr_addr_i] <= wr_row_i;
  end
endmodule
