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

  // Per-element enables as a bit mask: the write merges new and old bits of the word.
  // (Generated assigns at constant offsets: a verilated loop would insert at computed offsets
  // into the wide vector every cycle.)
  logic [Width-1:0] wbits;
  for (genvar e = 0; e < Elems; e++) begin : g_wbits
    assign wbits[ElemW*e +: ElemW] = {ElemW{wmask_i[e]}};
  end

  always_ff @(posedge clk_i) begin
    if (we_i) begin
      mem_q[waddr_i] <= (mem_q[waddr_i] & ~wbits) | (wdata_i & wbits);
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
