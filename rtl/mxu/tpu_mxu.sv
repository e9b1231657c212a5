// tpu_mxu: the matrix unit — an N x N weight-stationary bf16 systolic array (tpu_mxu_array)
// with double-buffered weight loading, fp32 accumulation and an accumulator memory
// (tpu_mxu_acc_mem). Command interface (docs/architecture.md has the timing diagram):
//   * Weight port: a tile is N rows of N bf16 weights, W[k][n], one row per accepted cycle,
//     row 0 first. It fills the shadow bank while the active bank computes; w_ready_o stays low
//     once the shadow bank is full until a row with a_first_i takes it.
//   * Activation port: one row of N bf16 activations per accepted cycle. a_first_i marks the
//     first row of a tile: it (and the rows after it) use the weights loaded last; it waits
//     until that tile is complete. Each row carries the accumulator row its result goes to and
//     a mode: overwrite (acc = sum) or accumulate (acc = acc + sum, fp32 RNE).
//   * Result: the row's N column sums are written to the accumulator memory at the end of the
//     cycle 2N - 1 cycles after the row was accepted. Throughput one row per cycle; a tile of
//     T rows after another takes max(T, N + 1) cycles (docs/architecture.md derives it).
//   * Read port: one accumulator row per accepted cycle, data the cycle after; it returns the
//     contents before any write in the same cycle. The memory is two banks, the low and the
//     high half of the rows (tpu_mxu_acc_mem each): the port yields (acc_rd_ready_o low, a
//     function of acc_rd_addr_i) only to an accumulating row's read of the same bank (also one
//     the bypass serves), so an epilogue reading one half runs beside an accumulating matmul in
//     the other (the compiler's row blocks alternate halves).
//   * Write port (the VPU's VPU.ST acc): one accumulator row per accepted cycle, written at the
//     end of that cycle. The array's result writes have fixed timing and always win: the port
//     is not ready (acc_wr_ready_o low, a registered condition) in a cycle a result is written.
`include "tpu_assert.svh"

module tpu_mxu #(
  parameter int unsigned N       = 16,                // array dimension, 4 .. 128
  parameter int unsigned AccRows = 256,               // accumulator rows, a power of two >= 4
  localparam int unsigned AccAddrW = $clog2(AccRows)
) (
  input  logic                clk_i,
  input  logic                rst_ni,
  input  logic                clear_i,                // program start: no weight tile loaded
  // weight tile rows
  input  logic                w_valid_i,              // w_row_i holds the next weight row
  output logic                w_ready_o,              // shadow bank can take a row
  input  logic [16*N-1:0]   w_row_i,                // bf16 W[k][n] at bits 16n, k = 0 .. N-1
  // activation rows
  input  logic                a_valid_i,              // a_row_i holds a row
  output logic                a_ready_o,              // row accepted this cycle if valid
  input  logic [16*N-1:0]   a_row_i,                // bf16 A[m][k] at bits 16k
  input  logic                a_first_i,              // first row of a tile: swap weight banks
  input  logic [AccAddrW-1:0] a_acc_addr_i,           // accumulator row for this row's result
  input  logic                a_accumulate_i,         // 1: acc += result, 0: acc = result
  // accumulator read port
  input  logic                acc_rd_valid_i,         // read acc_rd_addr_i
  output logic                acc_rd_ready_o,         // read accepted this cycle if valid
  input  logic [AccAddrW-1:0] acc_rd_addr_i,
  output logic                acc_rd_data_valid_o,    // acc_rd_data_o holds a requested row
  output logic [32*N-1:0]   acc_rd_data_o,          // fp32 word n at bits 32n
  // accumulator write port
  input  logic                acc_wr_valid_i,         // write acc_wr_data_i to acc_wr_addr_i
  output logic                acc_wr_ready_o,         // written this cycle if valid
  input  logic [AccAddrW-1:0] acc_wr_addr_i,
  input  logic [32*N-1:0]     acc_wr_data_i,          // fp32 word n at bits 32n
  // status
  output logic                busy_o                  // rows or weights still in flight
);

  localparam int unsigned RowIdxW  = $clog2(N);
  localparam int unsigned Latency  = 2 * N - 1;       // accept -> accumulator write cycle
  localparam int unsigned CntW     = $clog2(2 * N + 2) + 1;

  // ---------------------------------------------------------------- weight bank control
  logic               active_bank_q;                 // bank the newest tile's rows use
  logic               shadow_full_q;                 // all N rows of the next tile issued
  logic               weights_valid_q;               // a tile has been swapped in since reset
  logic [RowIdxW-1:0] wload_row_q;                   // next shadow row to fill
  logic [RowIdxW:0]   wload_cycles_q;                 // cycles a loaded row still skews
  logic               w_fire, a_fire, swap;

  assign w_ready_o = !shadow_full_q;
  assign w_fire    = w_valid_i && w_ready_o;
  assign a_ready_o = !a_first_i || shadow_full_q;
  assign a_fire    = a_valid_i && a_ready_o;
  assign swap      = a_fire && a_first_i;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      active_bank_q   <= 1'b0;
      shadow_full_q   <= 1'b0;
      weights_valid_q <= 1'b0;
      wload_row_q     <= '0;
      wload_cycles_q   <= '0;
    end else if (clear_i) begin
      // Only between programs, with the array idle: a tile loaded and never used is dropped.
      shadow_full_q   <= 1'b0;
      weights_valid_q <= 1'b0;
      wload_row_q     <= '0;
      wload_cycles_q  <= '0;
    end else begin
      if (w_fire) begin
        wload_row_q   <= (wload_row_q == RowIdxW'(N - 1)) ? '0 : wload_row_q + 1'b1;
        wload_cycles_q <= (RowIdxW + 1)'(N - 1);
      end else if (wload_cycles_q != '0) begin
        wload_cycles_q <= wload_cycles_q - 1'b1;
      end
      if (swap) begin
        active_bank_q   <= !active_bank_q;
        weights_valid_q <= 1'b1;
      end
      if (w_fire && (wload_row_q == RowIdxW'(N - 1))) shadow_full_q <= 1'b1;
      else if (swap) shadow_full_q <= 1'b0;
    end
  end

  // ---------------------------------------------------------------- the array
  logic  act_en, wload_en;
  logic [32*N-1:0] array_out;
  logic [CntW-1:0] inflight_q;                       // rows accepted, not yet written

  assign act_en   = a_fire || (inflight_q != '0);
  assign wload_en = w_fire || (wload_cycles_q != '0);

  tpu_mxu_array #(.N(N)) u_array (
    .clk_i,
    .rst_ni,
    .act_en_i        (act_en),
    .act_row_i       (a_row_i),
    .act_bank_i      (swap ? !active_bank_q : active_bank_q),
    .wload_en_i      (wload_en),
    .wload_valid_i   (w_fire),
    .wload_row_idx_i (wload_row_q),
    .wload_bank_i    (!active_bank_q),
    .wload_row_i     (w_row_i),
    .out_row_o       (array_out)
  );

  // ---------------------------------------------------------------- row metadata pipeline
  // Entry k holds the row accepted k + 1 cycles ago; entry Latency - 2 reads the accumulator
  // (accumulate mode), entry Latency - 1 writes it. It shifts every cycle (O(N) work, unlike
  // the array's N * N), so a valid entry sits in the last stage for exactly one cycle.
  // meta_addr_q is flat, entry k at bits AccAddrW * k: Yosys 0.23 reads no 2-D packed arrays.
  logic [Latency-1:0]                meta_valid_q;
  logic [Latency-1:0]                meta_accum_q;
  logic [Latency*AccAddrW-1:0]       meta_addr_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      meta_valid_q <= '0;
    end else begin
      meta_valid_q <= {meta_valid_q[Latency-2:0], a_fire};
      meta_accum_q <= {meta_accum_q[Latency-2:0], a_accumulate_i};
      meta_addr_q  <= {meta_addr_q[(Latency-1)*AccAddrW-1:0], a_acc_addr_i};
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) inflight_q <= '0;
    else inflight_q <= inflight_q + CntW'(a_fire) - CntW'(meta_valid_q[Latency - 1]);
  end

  // ---------------------------------------------------------------- accumulate and write
  logic                rmw_rd_en, rmw_bypass, wr_en, host_rd_fire;
  logic [AccAddrW-1:0] rmw_rd_addr, wr_addr;
  logic [32*N-1:0]     mem_rd_row;
  logic [32*N-1:0]     wr_row;
  logic                bypass_q;                     // last cycle's write hit last cycle's read
  logic [32*N-1:0]     bypass_row_q;

  assign rmw_rd_en   = meta_valid_q[Latency - 2] && meta_accum_q[Latency - 2];
  assign rmw_rd_addr = meta_addr_q[AccAddrW*(Latency - 2) +: AccAddrW];
  assign wr_en       = meta_valid_q[Latency - 1];
  assign wr_addr     = meta_addr_q[AccAddrW*(Latency - 1) +: AccAddrW];

  // wr_row is used only with wr_en (the write and the bypass register), so the N adders are
  // evaluated only for an accumulating row being written (in the verilated model a ?: would
  // run all N fp32_adds whenever the array's output changes).
  always_comb begin
    tpu_pkg::fp32_t acc_in;
    acc_in = '0;
    wr_row = array_out;
    if (wr_en && meta_accum_q[Latency - 1]) begin
      for (int c = 0; c < N; c++) begin
        acc_in = bypass_q ? bypass_row_q[32*c +: 32] : mem_rd_row[32*c +: 32];
        wr_row[32*c +: 32] = tpu_fp_pkg::fp32_add(acc_in, array_out[32*c +: 32]);
      end
    end
  end

  // The memory returns pre-write contents, so a read-modify-write of the row the previous row
  // is writing this cycle takes that row's value from the bypass instead, and the memory read
  // is not issued at all (it would return stale data; it also saves the access).
  assign rmw_bypass = rmw_rd_en && wr_en && (wr_addr == rmw_rd_addr);
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) bypass_q <= 1'b0;
    else bypass_q <= rmw_bypass;
  end
  always_ff @(posedge clk_i) begin
    if (rmw_rd_en && wr_en) bypass_row_q <= wr_row;
  end

  // Two banks: row r lies in bank r[AccAddrW-1]. A read is registered; the bank it went to
  // selects the data the cycle after (the accumulate path's: the bank of the row it writes).
  localparam int unsigned BankAddrW = AccAddrW - 1;
  if (AccRows < 4 || (AccRows & (AccRows - 1)) != 0) begin : g_bad_acc_rows
    $error("tpu_mxu: AccRows %0d is not a power of two >= 4 (two banks by the row's top bit)",
           AccRows);
  end
  logic rmw_bank, rd_bank, wr_bank, ext_wr_fire;
  logic rd_bank_q;                                   // the bank the host read went to
  assign rmw_bank = rmw_rd_addr[AccAddrW-1];
  assign rd_bank  = acc_rd_addr_i[AccAddrW-1];
  assign acc_rd_ready_o = !(rmw_rd_en && rmw_bank == rd_bank);
  assign host_rd_fire   = acc_rd_valid_i && acc_rd_ready_o;

  // The external write takes the memory's write port in cycles the array writes no result.
  assign acc_wr_ready_o = !wr_en;
  assign ext_wr_fire    = acc_wr_valid_i && acc_wr_ready_o;
  assign wr_bank        = wr_en ? wr_addr[AccAddrW-1] : acc_wr_addr_i[AccAddrW-1];

  logic [32*N-1:0] bank_rd_row [2];
  for (genvar k = 0; k < 2; k++) begin : g_bank
    logic rmw_here, host_here;
    assign rmw_here  = rmw_rd_en && !rmw_bypass && rmw_bank == 1'(k);
    assign host_here = host_rd_fire && rd_bank == 1'(k);
    tpu_mxu_acc_mem #(.N(N), .Rows(AccRows / 2)) u_acc_mem (
      .clk_i,
      .wr_en_i   ((wr_en || ext_wr_fire) && wr_bank == 1'(k)),
      .wr_addr_i (wr_en ? wr_addr[BankAddrW-1:0] : acc_wr_addr_i[BankAddrW-1:0]),
      .wr_row_i  (wr_en ? wr_row : acc_wr_data_i),
      .rd_en_i   (rmw_here || host_here),
      .rd_addr_i (rmw_here ? rmw_rd_addr[BankAddrW-1:0] : acc_rd_addr_i[BankAddrW-1:0]),
      .rd_row_o  (bank_rd_row[k])
    );
  end
  // the accumulate path reads the bank of the row it writes now (read last cycle)
  assign mem_rd_row = bank_rd_row[wr_addr[AccAddrW-1]];

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) acc_rd_data_valid_o <= 1'b0;
    else acc_rd_data_valid_o <= host_rd_fire;
  end
  always_ff @(posedge clk_i) begin
    if (host_rd_fire) rd_bank_q <= rd_bank;
  end
  assign acc_rd_data_o = bank_rd_row[rd_bank_q];

  assign busy_o = (inflight_q != '0) || (wload_cycles_q != '0);

  `TPU_ASSERT_IMPLIES(FirstTileNeedsFirstFlag, a_valid_i, (a_first_i || weights_valid_q))
  `TPU_ASSERT(InflightBounded, inflight_q <= CntW'(Latency))
  `TPU_ASSERT_IMPLIES(ExtWriteYieldsToResults, wr_en, !ext_wr_fire)
endmodule
