// tpu_dma_fifo: a small synchronous FIFO for the DMA's queues (element offsets, read data, words
// to write). Depth entries of Width bits in registers; the head is readable combinationally
// (data_o is valid whenever empty_o is low), so a push is visible at the head the next cycle.
// One push and one pop per cycle, both allowed in the same cycle; full_o and empty_o are
// registered-state flags (no path from push_i or pop_i to them within a cycle).
`include "tpu_assert.svh"

module tpu_dma_fifo #(
  parameter int unsigned Width = 8,                   // bits per entry
  parameter int unsigned Depth = 4,                   // entries, a power of two >= 2
  localparam int unsigned PtrW = $clog2(Depth),
  localparam int unsigned CntW = PtrW + 1
) (
  input  logic             clk_i,
  input  logic             rst_ni,
  // write side
  input  logic             push_i,                    // enqueue data_i (never when full_o)
  input  logic [Width-1:0] data_i,
  output logic             full_o,                    // Depth entries held
  // read side
  input  logic             pop_i,                     // dequeue the head (never when empty_o)
  output logic [Width-1:0] data_o,                    // the head, valid when !empty_o
  output logic             empty_o,
  output logic [PtrW:0]    count_o                    // entries held, 0 .. Depth
);
  logic [Width-1:0] mem_q [Depth];
  logic [PtrW:0]    wptr_q, rptr_q;                   // one extra bit tells full from empty

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      wptr_q <= '0;
      rptr_q <= '0;
    end else begin
      if (push_i) wptr_q <= wptr_q + 1'b1;
      if (pop_i)  rptr_q <= rptr_q + 1'b1;
    end
  end

  always_ff @(posedge clk_i) begin
    if (push_i) mem_q[wptr_q[PtrW-1:0]] <= data_i;
  end

  assign count_o = wptr_q - rptr_q;
  assign empty_o = wptr_q == rptr_q;
  assign full_o  = count_o == CntW'(Depth);
  assign data_o  = mem_q[rptr_q[PtrW-1:0]];

  `TPU_ASSERT_IMPLIES(NoPushWhenFull, push_i, !full_o)
  `TPU_ASSERT_IMPLIES(NoPopWhenEmpty, pop_i, !empty_o)
endmodule
