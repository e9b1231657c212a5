// tpu_dma_agen: the DMA's address generator. A descriptor is a base byte address and up to four
// nested loops of (count, stride); it walks
//   for i3 < count[3]: for i2 < count[2]: for i1 < count[1]: for i0 < count[0]:
//     addr = base + i3*stride[3] + i2*stride[2] + i1*stride[1] + i0*stride[0]
// emitting one address per accepted cycle (valid/ready), innermost loop fastest, so im2col
// windows, pooling windows, transposes and batch slices are address patterns, not host work.
// Strides are signed bytes; a count of 1 makes a loop unused. Every address is checked before
// it is emitted: an element that would fall outside [0, limit) raises fault_o with the
// offending address and element index and stops the walk instead of wrapping.
// Incremental form: cur_q (loop k) is the address where the current iteration of loop k began; one
// adder per cycle advances the lowest loop that has not finished, and every loop below it
// restarts at that new address. Runs: when the innermost loop is contiguous (stride = element
// size), run_o says how many elements from addr_o on lie in the same 32-byte word and in that
// loop (1 .. 16); the consumer takes take_i of them (1 .. run_o) in one cycle. A run never holds
// an out-of-range element: it stays inside one word, and a word that reaches past the limit
// gives runs of 1. Throughput one run per cycle; 1 cycle from start_i to the first address. abort_i abandons a walk in progress (idle the next cycle, no fault): the DMA
// uses it to stop one walk when the other has faulted.
`include "tpu_assert.svh"

module tpu_dma_agen #(
  parameter int unsigned AddrW  = 34,                 // byte address width (16 GiB)
  parameter int unsigned CountW = 16,                 // loop count width
  localparam int unsigned Loops = 4
) (
  input  logic                     clk_i,
  input  logic                     rst_ni,
  // descriptor (sampled when start_i is accepted)
  input  logic                     start_i,           // begin a walk (when idle)
  input  logic                     abort_i,           // abandon the walk in progress
  output logic                     idle_o,            // no walk in progress: start_i accepted
  input  logic [AddrW-1:0]         base_i,            // byte address of element (0,0,0,0)
  input  logic [4*CountW-1:0]      count_i,           // loop k's count at bits CountW*k, >= 1
  input  logic [4*(AddrW+1)-1:0]   stride_i,          // loop k's signed byte stride
  input  logic [AddrW:0]           limit_i,           // addresses must stay below this
  input  logic [3:0]               elem_bytes_i,      // bytes per element (2: bf16, 4: fp32)
  // addresses
  output logic                     addr_valid_o,      // addr_o is the next element's address
  input  logic                     addr_ready_i,      // the consumer takes it this cycle
  output logic [AddrW-1:0]         addr_o,
  output logic [4:0]               run_o,             // elements from addr_o on, one word
  input  logic [4:0]               take_i,            // elements taken (1 .. run_o)
  output logic                     addr_last_o,       // the walk's final element
  // faults
  output logic                     fault_o,           // sticky until the next start
  output logic [AddrW:0]           fault_addr_o,      // the out-of-range address (signed)
  output logic [31:0]              fault_index_o      // how many elements were emitted first
);
  typedef enum logic [1:0] {IdleS, RunS, FaultS} state_e;

  state_e                 state_q;
  localparam int unsigned AW1 = AddrW + 1;          // signed address width
  // Per-loop registers as flat vectors, loop k at [W*k +: W] (nonblocking writes in a loop
  // need packed vectors in Verilator; Yosys 0.23 reads no 2-D packed arrays).
  logic [Loops*AW1-1:0]    cur_q;
  logic [Loops*CountW-1:0] idx_q;
  logic [Loops*CountW-1:0] count_q;
  logic [Loops*AW1-1:0]    stride_q;
  logic [AddrW:0]         limit_q;
  logic [3:0]             elem_bytes_q;
  logic [31:0]            emitted_q;

  // The lowest loop that still has iterations left advances; all loops below it restart. A run
  // that takes the rest of loop 0 advances the lowest loop above it that has not finished.
  logic [2:0]        level;                           // 0..3, or 4 = every loop finished
  logic [2:0]        level_above0;                    // the same, loop 0 counted as finished
  logic [2:0]        step_level;                      // the loop this cycle's take advances
  int                step32;                          // the same, for loop comparisons
  logic [AddrW:0]    next_addr;
  logic              in_range;
  logic [CountW-1:0] left0;                           // elements left in loop 0, this one too
  logic [AddrW:0]    word_end;                        // the byte after addr_o's 32-byte word
  logic [5:0]        word_left;                       // bytes from addr_o to its word's end
  logic [4:0]        word_elems;
  logic              contiguous;
  logic [AddrW:0]    step0;                           // loop 0's advance for this take
  // The run at addr_o (independent of take_i: the consumer's take may depend on it).
  always_comb begin
    left0      = count_q[CountW-1:0] - idx_q[CountW-1:0];
    word_end   = {cur_q[AW1-1:5], 5'd0} + AW1'(32);
    word_left  = 6'd32 - {1'b0, cur_q[4:0]};
    word_elems = (elem_bytes_q == 4'd4) ? 5'(word_left >> 2) : 5'(word_left >> 1);
    contiguous = (stride_q[AW1-1:0] == AW1'(elem_bytes_q)) && (word_end <= limit_q);
    run_o = 5'd1;
    if (contiguous) run_o = (left0 < CountW'(word_elems)) ? 5'(left0) : word_elems;
  end

  // Used only while walking (addr_valid_o, the loop-state update, addr_last_o with a valid
  // address): evaluated only in RunS, so an idle walk costs the simulator nothing here.
  always_comb begin
    level        = 3'd4;
    level_above0 = 3'd4;
    step_level   = 3'd4;
    step32       = 4;
    step0        = '0;
    next_addr    = cur_q[AW1-1:0];
    in_range     = 1'b0;
    if (state_q == RunS) begin
      for (int k = Loops - 1; k >= 0; k--) begin
        if (idx_q[CountW*k +: CountW] != count_q[CountW*k +: CountW] - 1'b1) begin
          level = 3'(k);
          if (k > 0) level_above0 = 3'(k);
        end
      end
      step_level = (CountW'(take_i) == left0) ? level_above0 : 3'd0;
      step32 = {29'd0, step_level};
      step0 = (take_i == 5'd1) ? stride_q[AW1-1:0]
                               : ((elem_bytes_q == 4'd4) ? AW1'({take_i, 2'b00})
                                                         : AW1'({take_i, 1'b0}));
      if (step_level == 3'd4)      next_addr = cur_q[AW1-1:0];
      else if (step_level == 3'd0) next_addr = cur_q[AW1-1:0] + step0;
      else next_addr = cur_q[AW1*step_level[1:0] +: AW1] + stride_q[AW1*step_level[1:0] +: AW1];
      // In range: not negative, and the whole element below the limit.
      in_range = !cur_q[AddrW] && ((cur_q[AW1-1:0] + AW1'(elem_bytes_q)) <= limit_q);
    end
  end

  assign idle_o        = state_q != RunS;
  assign addr_valid_o  = (state_q == RunS) && in_range;
  assign addr_o        = cur_q[AddrW-1:0];
  assign addr_last_o   = level == 3'd4;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      state_q       <= IdleS;
      fault_o       <= 1'b0;
      fault_addr_o  <= '0;
      fault_index_o <= '0;
      emitted_q     <= '0;
    end else begin
      unique case (state_q)
        IdleS, FaultS: begin
          if (start_i) begin
            state_q   <= RunS;
            fault_o   <= 1'b0;
            emitted_q <= '0;
          end
        end
        RunS: begin
          if (abort_i) begin
            state_q <= IdleS;
          end else if (!in_range) begin
            state_q       <= FaultS;
            fault_o       <= 1'b1;
            fault_addr_o  <= cur_q[AW1-1:0];
            fault_index_o <= emitted_q;
          end else if (addr_ready_i) begin
            emitted_q <= emitted_q + 32'(take_i);
            if (step_level == 3'd4) state_q <= IdleS;
          end
        end
        default: state_q <= IdleS;
      endcase
    end
  end

  // Loop state: loaded at start, advanced on every accepted address.
  always_ff @(posedge clk_i) begin
    if (idle_o && start_i) begin
      cur_q    <= {Loops{1'b0, base_i}};
      idx_q    <= '0;
      count_q  <= count_i;
      stride_q <= stride_i;
      limit_q      <= limit_i;
      elem_bytes_q <= elem_bytes_i;
    end else if (addr_valid_o && addr_ready_i && !abort_i && (step_level != 3'd4)) begin
      for (int k = 0; k < Loops; k++) begin
        if (k < step32) begin
          cur_q[AW1*k +: AW1]      <= next_addr;
          idx_q[CountW*k +: CountW] <= '0;
        end else if (k == step32) begin
          cur_q[AW1*k +: AW1]      <= next_addr;
          idx_q[CountW*k +: CountW] <= idx_q[CountW*k +: CountW] +
                                       ((k == 0) ? CountW'(take_i) : CountW'(1));
        end
      end
    end
  end

  // take_i is 1 .. run_o whenever an address is taken.
  `TPU_ASSERT_IMPLIES(TakeWithinRun, (addr_valid_o && addr_ready_i), (take_i != '0) && (take_i <= run_o))
endmodule
