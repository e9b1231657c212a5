// tpu_mxu_acc_mem: the accumulator memory, Rows entries of N fp32 words, on a two-port SRAM
// macro (tpu_sram_dp): one write and one read per cycle, read data registered (the cycle after
// rd_en_i), a read of the row being written in the same cycle returns the old contents, and in
// simulation a read of a never-written row is reported.
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
  tpu_sram_dp #(
    .Words (Rows),
    .Elems (N),
    .ElemW (32)
  ) u_sram (
    .clk_i,
    .we_i    (wr_en_i),
    .waddr_i (wr_addr_i),
    .wmask_i ({N{1'b1}}),
    .wdata_i (wr_row_i),
    .re_i    (rd_en_i),
    .raddr_i (rd_addr_i),
    .rdata_o (rd_row_o)
  );
endmodule
