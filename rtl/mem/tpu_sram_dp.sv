// tpu_sram_dp: two-port SRAM macro model (one write port, one read port, same clock),
// Words x (Elems * ElemW) bits. Both ports work every cycle; read data is registered and
// appears the cycle after the read; a read of the word being written in the same cycle returns
// the old contents (read-before-write). Per-element write enables. Contents survive reset. In
// simulation a read of a word holding a never-written element is reported ($error with the
// instance, address and time); the bookkeeping is compiled out under SYNTHESIS.
module tpu_sram_dp #(
  parameter int unsigned Words = 256,                 // depth
  parameter int unsigned Elems = 4,                   // write-enable granules per word
  parameter int unsigned ElemW = 16,                  // bits per granule
  localparam int unsigned AddrW = $clog2(Words),
  localparam int unsigned Width = Elems * ElemW
) (
  input  logic             clk_i,
  // write port
  input  logic             we_i,                      // write this cycle
  input  logic [AddrW-1:0] waddr_i,                   // word address, < Words
  input  logic [Elems-1:0] wmask_i,                   // per-element write enable
  input  logic [Width-1:0] wdata_i,                   // element e at bits ElemW * e
  // read port
  input  logic             re_i,                      // read this cycle
  input  logic [AddrW-1:0] raddr_i,                   // word address, < Words
  output logic [Width-1:0] rdata_o                    // the cycle after re_i
);
  logic [Width-1:0] mem_q [Words];

  // A write merges the enabled elements into the word. The element loop has constant bounds and
  // a small body: the simulator unrolls it into constant-offset moves, and runs it only for a
  // write (a mask expanded by continuous assigns cost every cycle).
  always_ff @(posedge clk_i) begin
    if (we_i) begin
      logic [Width-1:0] w;
      w = mem_q[waddr_i];
      for (int e = 0; e < Elems; e++) begin
        if (wmask_i[e]) w[ElemW*e +: ElemW] = wdata_i[ElemW*e +: ElemW];
      end
      mem_q[waddr_i] <= w;
    end
    if (re_i) rdata_o <= mem_q[raddr_i];
  end

`ifndef SYNTHESIS
  logic [Elems-1:0] written_q [Words];
  initial begin
    for (int w = 0; w < Words; w++) written_q[w] = '0;
  end
  always_ff @(posedge clk_i) begin
    if (we_i) written_q[waddr_i] <= written_q[waddr_i] | wmask_i;
    if (re_i && (written_q[raddr_i] != {Elems{1'b1}})) begin
      $error("%m: read of never-written data at address %0d (written elements %b) at time %0t",
             raddr_i, written_q[raddr_i], $time);
    end
  end
`endif
endmodule
