// tpu_sram_sp: single-port SRAM macro model, Words x (Elems * ElemW) bits. One access per cycle:
// a write (with a per-element write enable) or a read, whose data appears on rdata_o the cycle
// after and holds until the next read. Contents survive reset (no reset on the array). In
// simulation it tracks which elements were ever written and reports a read of a word holding a
// never-written element ($error naming the instance, the address and the time) instead of
// silently returning stale or random data; that bookkeeping is compiled out under SYNTHESIS.
module tpu_sram_sp #(
  parameter int unsigned Words = 256,                 // depth
  parameter int unsigned Elems = 4,                   // write-enable granules per word
  parameter int unsigned ElemW = 16,                  // bits per granule
  parameter bit          CheckUnwritten = 1'b1,       // report reads of never-written elements
  localparam int unsigned AddrW = $clog2(Words),
  localparam int unsigned Width = Elems * ElemW
) (
  input  logic             clk_i,
  input  logic             req_i,                     // an access this cycle
  input  logic             we_i,                      // 1: write, 0: read
  input  logic [AddrW-1:0] addr_i,                    // word address, < Words
  input  logic [Elems-1:0] wmask_i,                   // per-element write enable (writes)
  input  logic [Width-1:0] wdata_i,                   // element e at bits ElemW * e
  output logic [Width-1:0] rdata_o                    // read data, the cycle after the read
);
  logic [Width-1:0] mem_q [Words];

  // A write merges the enabled elements into the word. The element loop has constant bounds and
  // a small body: the simulator unrolls it into constant-offset moves, and runs it only for a
  // write (a mask expanded by continuous assigns cost every bank every cycle).
  always_ff @(posedge clk_i) begin
    if (req_i && we_i) begin
      logic [Width-1:0] w;
      w = mem_q[addr_i];
      for (int e = 0; e < Elems; e++) begin
        if (wmask_i[e]) w[ElemW*e +: ElemW] = wdata_i[ElemW*e +: ElemW];
      end
      mem_q[addr_i] <= w;
    end
    if (req_i && !we_i) rdata_o <= mem_q[addr_i];
  end

`ifndef SYNTHESIS
  logic [Elems-1:0] written_q [Words];
  initial begin
    for (int w = 0; w < Words; w++) written_q[w] = '0;
  end
  always_ff @(posedge clk_i) begin
    if (req_i && we_i) written_q[addr_i] <= written_q[addr_i] | wmask_i;
    if (CheckUnwritten && req_i && !we_i && (written_q[addr_i] != {Elems{1'b1}})) begin
      $error("%m: read of never-written data at address %0d (written elements %b) at time %0t",
             addr_i, written_q[addr_i], $time);
    end
  end
`endif
endmodule
