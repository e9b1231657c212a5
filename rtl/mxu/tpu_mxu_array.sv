// tpu_mxu_array: the N x N weight-stationary systolic array with its input skew and output
// de-skew. PE (r, c) holds weight W[r][c] in two banks; activation element r of a row enters
// array row r after an r-cycle skew, moves right one PE per cycle, and the fp32 partial sums
// move down, so column c of the bottom row produces sum_r A[r] * W[r][c] (rows in order
// 0..N-1, starting from +0) N - 1 + c cycles after entry; the de-skew delays column c by
// N - 1 - c more cycles, so all N sums of one input row appear together on out_row_o during
// the cycle 2N - 1 cycles after that row was accepted (out_row_o is a register). Throughput:
// one row per cycle.
//
// Weights load one row per cycle (wload_*): element c of the row for array row r is delayed c
// cycles (a column skew, like the activations' row skew) and written into bank wload_bank_i of
// PE (r, c) after that PE's MAC for the cycle, so a weight tile sweeps the array on the same
// diagonal as the activations. Every activation carries a bank tag, so a new tile's rows use
// the new bank while the previous tile's last rows are still in the array (double buffering
// with no drain bubble).
//
// Simulation form: the array is one always_ff over register arrays, with rolled descending
// loops and blocking assignments, so every register is read before it is overwritten in the
// same clock edge. This is N * N copies of tpu_mxu_pe; it keeps Verilator's C++ small and fast
// for any N (docs/performance.md). act_en_i / wload_en_i are clock enables: idle = no work.
// The skew and de-skew delay lines (row r delayed r cycles, column c delayed N - 1 - c, weight
// column c delayed c) are N-entry register rings with one shared write pointer per path rather
// than shift registers: the same delays, but O(N) register moves per cycle instead of O(N^2).
module tpu_mxu_array #(
  parameter int unsigned N = 16,                  // array dimension (rows = columns)
  localparam int unsigned RowIdxW = $clog2(N)
) (
  input  logic           clk_i,
  input  logic           rst_ni,
  // activation rows
  input  logic           act_en_i,                // shift the activation path this cycle
  input  logic [16*N-1:0] act_row_i,              // bf16 row entering, element r -> row r
  input  logic           act_bank_i,              // weight bank the row uses
  // weight rows
  input  logic           wload_en_i,              // shift the weight-load path this cycle
  input  logic           wload_valid_i,           // a weight row enters this cycle
  input  logic [RowIdxW-1:0] wload_row_idx_i,     // which array row it is for
  input  logic           wload_bank_i,            // bank it is written to
  input  logic [16*N-1:0] wload_row_i,            // bf16 W[row][0..N-1], element c at c
  // results
  output logic [32*N-1:0] out_row_o               // fp32 de-skewed column sums, c at c
);
  // (p - d) mod N: the ring slot written d enabled cycles before slot p.
  function automatic logic [RowIdxW-1:0] ring_back(input logic [RowIdxW-1:0] p,
                                                   input int unsigned d);
    ring_back = (32'(p) >= d) ? RowIdxW'(32'(p) - d) : RowIdxW'(32'(p) + N - d);
  endfunction

  // Activation path. act_ring_q[r] delays array row r's input by r cycles; act_q/bank_q are
  // the values each PE passes right, psum_q the sums each PE passes down; deskew_ring_q[c]
  // delays column c's bottom sum by N - 2 - c cycles before the output register.
  logic [RowIdxW-1:0] act_ptr_q;                  // ring slot written this enabled cycle
  tpu_pkg::bf16_t     act_ring_q    [N][N];
  logic               bank_ring_q   [N][N];
  tpu_pkg::bf16_t     act_q         [N][N];
  logic               bank_q        [N][N];
  tpu_pkg::fp32_t     psum_q        [N][N];
  tpu_pkg::fp32_t     deskew_ring_q [N][N];
  // Weight path: two banks per PE, indexed by the bank tag (a mux either way, but the
  // simulator reads it without a data-dependent branch); wring_*_q[c] delays column c of a
  // loaded row by c cycles.
  logic [RowIdxW-1:0] wload_ptr_q;
  tpu_pkg::bf16_t     weight_q      [N][N][2];
  logic               wring_valid_q [N][N];
  logic               wring_bank_q  [N][N];
  logic [RowIdxW-1:0] wring_row_q   [N][N];
  tpu_pkg::bf16_t     wring_data_q  [N][N];

  always_ff @(posedge clk_i or negedge rst_ni) begin
    tpu_pkg::bf16_t     a_in, d_in;
    logic               b_in, v_in, k_in;
    logic [RowIdxW-1:0] row_in;
    tpu_pkg::fp32_t     p_in;
    tpu_pkg::bf16_t     a0 [N];                   // column 0's input, per row
    logic               b0 [N];
    logic [32*N-1:0]    out_next;
    if (!rst_ni) begin
      act_ptr_q   = '0;
      wload_ptr_q = '0;
      for (int c = 0; c < N; c++) begin
        for (int j = 0; j < N; j++) wring_valid_q[c][j] = 1'b0;
      end
    end else begin
      if (act_en_i) begin
        // De-skew first: it samples the bottom row's sums before this edge updates them.
        for (int c = 0; c < N - 1; c++) begin
          deskew_ring_q[c][act_ptr_q] = psum_q[N - 1][c];
          out_next[32*c +: 32] = deskew_ring_q[c][ring_back(act_ptr_q, N - 2 - c)];
        end
        // Each row's input this cycle: row r's element of the row that entered r cycles ago
        // (row 0: the row entering now).
        a0[0] = act_row_i[15:0];
        b0[0] = act_bank_i;
        for (int r = 1; r < N; r++) begin
          a0[r] = act_ring_q[r][ring_back(act_ptr_q, r)];
          b0[r] = bank_ring_q[r][ring_back(act_ptr_q, r)];
        end
        // Bottom row first, rightmost column first: psum_q[r - 1] and act_q[r][c - 1] are
        // still last cycle's values when PE (r, c) reads them. Column 0 takes the row's input.
        for (int r = N - 1; r >= 0; r--) begin
          for (int c = N - 1; c >= 0; c--) begin
            a_in = (c == 0) ? a0[r] : act_q[r][c - 1];
            b_in = (c == 0) ? b0[r] : bank_q[r][c - 1];
            p_in = (r == 0) ? 32'h0000_0000 : psum_q[r - 1][c];
            psum_q[r][c] = tpu_fp_pkg::mac(p_in, a_in, weight_q[r][c][b_in]);
            act_q[r][c]  = a_in;
            bank_q[r][c] = b_in;
          end
          act_ring_q[r][act_ptr_q]  = act_row_i[16*r +: 16];
          bank_ring_q[r][act_ptr_q] = act_bank_i;
        end
        act_ptr_q = (act_ptr_q == RowIdxW'(N - 1)) ? '0 : act_ptr_q + 1'b1;
        // Registered output stage. Registers assigned with '=' above are read by no other
        // process (that would race at the clock edge); the outside world sees them only
        // through this nonblocking copy, O(N) per cycle.
        out_next[32*(N-1) +: 32] = psum_q[N - 1][N - 1];
        out_row_o <= out_next;
      end
      // Weight writes, after the MACs above: a PE's MAC this edge still reads the old weight.
      if (wload_en_i) begin
        for (int c = 0; c < N; c++) begin
          if (c == 0) begin
            v_in   = wload_valid_i;
            k_in   = wload_bank_i;
            row_in = wload_row_idx_i;
            d_in   = wload_row_i[15:0];
          end else begin
            v_in   = wring_valid_q[c][ring_back(wload_ptr_q, c)];
            k_in   = wring_bank_q[c][ring_back(wload_ptr_q, c)];
            row_in = wring_row_q[c][ring_back(wload_ptr_q, c)];
            d_in   = wring_data_q[c][ring_back(wload_ptr_q, c)];
          end
          // Each PE of the column compares the row index (its write enable): constant row
          // indices, so synthesis sees registers with enables rather than a decoded memory.
          for (int r = 0; r < N; r++) begin
            if (v_in && (row_in == RowIdxW'(r))) weight_q[r][c][k_in] = d_in;
          end
          wring_valid_q[c][wload_ptr_q] = wload_valid_i;
          wring_bank_q[c][wload_ptr_q]  = wload_bank_i;
          wring_row_q[c][wload_ptr_q]   = wload_row_idx_i;
          wring_data_q[c][wload_ptr_q]  = wload_row_i[16*c +: 16];
        end
        wload_ptr_q = (wload_ptr_q == RowIdxW'(N - 1)) ? '0 : wload_ptr_q + 1'b1;
      end
    end
  end
endmodule
