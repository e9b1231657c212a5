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
// restarts at that new address. Throughput one address per cycle; 1 cycle from start_i to the
// first address. abort_i abandons a walk in progress (idle the next cycle, no fault): the DMA
// uses it to stop one walk when the other has faulted.
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
  output logic                     addr_last_o,       // the walk's final element
  // faults
  output logic                     fault_o,           // sticky until the next start
  output logic [AddrW:0]           fault_addr_o,      // the out-of-range address (signed)
  output logic [31:0]              fault_index_o      // how many addresses were emitted first
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

  // The lowest loop that still has iterations left advances; all loops below it restart.
  logic [2:0]     level;                              // 0..3, or 4 = every loop finished
  int             level32;                            // the same, for loop comparisons
  logic [AddrW:0] next_addr;
  logic           in_range;
  always_comb begin
    level = 3'd4;
    for (int k = Loops - 1; k >= 0; k--) begin
      if (idx_q[CountW*k +: CountW] != count_q[CountW*k +: CountW] - 1'b1) level = 3'(k);
    end
    level32 = {29'd0, level};
    next_addr = (level == 3'd4) ? cur_q[AW1-1:0]
                                : cur_q[AW1*level[1:0] +: AW1] + stride_q[AW1*level[1:0] +: AW1];
    // In range: not negative, and the whole element below the limit.
    in_range = !cur_q[AddrW] && ((cur_q[AW1-1:0] + AW1'(elem_bytes_q)) <= limit_q);
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
            emitted_q <= emitted_q + 1'b1;
            if (level == 3'd4) state_q <= IdleS;
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
    end else if (addr_valid_o && addr_ready_i && !abort_i && (level != 3'd4)) begin
      for (int k = 0; k < Loops; k++) begin
        if (k < level32) begin
          cur_q[AW1*k +: AW1]      <= next_addr;
          idx_q[CountW*k +: CountW] <= '0;
        end else if (k == level32) begin
          cur_q[AW1*k +: AW1]      <= next_addr;
          idx_q[CountW*k +: CountW] <= idx_q[CountW*k +: CountW] + 1'b1;
        end
      end
    end
  end
endmodule
