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
module tpu_mxu_array #(
  parameter int unsigned N = 16,                  // array dimension (rows = columns)
  localparam int unsigned RowIdxW = $clog2(N)
) (
  input  logic           clk_i,
  input  logic           rst_ni,
  // activation rows
  input  logic           act_en_i,                // shift the activation path this cycle
  input  logic [16*N-1:0] act_row_i,                // bf16 row entering, element r -> row r
  input  logic           act_bank_i,              // weight bank the row uses
  // weight rows
  input  logic           wload_en_i,              // shift the weight-load path this cycle
  input  logic           wload_valid_i,           // a weight row enters this cycle
  input  logic [RowIdxW-1:0] wload_row_idx_i,  // which array row it is for
  input  logic           wload_bank_i,            // bank it is written to
  input  logic [16*N-1:0] wload_row_i,              // bf16 W[row][0..N-1], element c at c
  // results
  output logic [32*N-1:0] out_row_o                 // fp32 de-skewed column sums, c at c
);

  // Activation path: skew_q[r][0..r-1] delays row r by r cycles; act_q/bank_q are the values
  // each PE passes right; psum_q the sums each PE passes down; deskew_q[c][0..N-2-c].
  tpu_pkg::bf16_t act_skew_q  [N][N];
  logic  bank_skew_q [N][N];
  tpu_pkg::bf16_t act_q       [N][N];
  logic  bank_q      [N][N];
  tpu_pkg::fp32_t psum_q      [N][N];
  tpu_pkg::fp32_t deskew_q    [N][N];
  // Weight path: two banks per PE; wskew_*_q[c][0..c-1] delay column c of a loaded row.
  tpu_pkg::bf16_t               weight0_q     [N][N];
  tpu_pkg::bf16_t               weight1_q     [N][N];
  logic                wskew_valid_q [N][N];
  logic                wskew_bank_q  [N][N];
  logic [RowIdxW-1:0]  wskew_row_q   [N][N];
  tpu_pkg::bf16_t               wskew_data_q  [N][N];

  always_ff @(posedge clk_i or negedge rst_ni) begin
    tpu_pkg::bf16_t              a_in, d_in;
    logic               b_in, v_in, k_in;
    logic [RowIdxW-1:0] row_in;
    tpu_pkg::fp32_t              p_in;
    logic [32*N-1:0]    out_next;
    if (!rst_ni) begin
      for (int c = 0; c < N; c++) begin
        for (int j = 0; j < N; j++) wskew_valid_q[c][j] = 1'b0;
      end
    end else begin
      if (act_en_i) begin
        // De-skew first: it samples the bottom row's sums before this edge updates them.
        for (int c = N - 2; c >= 0; c--) begin
          for (int j = N - 2 - c; j >= 1; j--) deskew_q[c][j] = deskew_q[c][j - 1];
          deskew_q[c][0] = psum_q[N - 1][c];
        end
        // Bottom row first, rightmost column first: psum_q[r - 1] and act_q[r][c - 1] are
        // still last cycle's values when PE (r, c) reads them.
        for (int r = N - 1; r >= 0; r--) begin
          for (int c = N - 1; c >= 0; c--) begin
            if (c == 0) begin
              a_in = (r == 0) ? act_row_i[15:0] : act_skew_q[r][r - 1];
              b_in = (r == 0) ? act_bank_i : bank_skew_q[r][r - 1];
            end else begin
              a_in = act_q[r][c - 1];
              b_in = bank_q[r][c - 1];
            end
            p_in = (r == 0) ? 32'h0000_0000 : psum_q[r - 1][c];
            psum_q[r][c] = tpu_fp_pkg::mac(p_in, a_in, b_in ? weight1_q[r][c] : weight0_q[r][c]);
            act_q[r][c]  = a_in;
            bank_q[r][c] = b_in;
          end
          for (int j = r - 1; j >= 1; j--) begin
            act_skew_q[r][j]  = act_skew_q[r][j - 1];
            bank_skew_q[r][j] = bank_skew_q[r][j - 1];
          end
          if (r > 0) begin
            act_skew_q[r][0]  = act_row_i[16*r +: 16];
            bank_skew_q[r][0] = act_bank_i;
          end
        end
        // Registered output stage. Registers assigned with '=' above are read by no other
        // process (that would race at the clock edge); the outside world sees them only
        // through this nonblocking copy of the de-skew tails, O(N) per cycle.
        for (int c = 0; c < N - 1; c++) out_next[32*c +: 32] = deskew_q[c][N - 2 - c];
        out_next[32*(N-1) +: 32] = psum_q[N - 1][N - 1];
        out_row_o <= out_next;
      end
      // Weight writes, after the MACs above: a PE's MAC this edge still reads the old weight.
      if (wload_en_i) begin
        for (int c = N - 1; c >= 0; c--) begin
          if (c == 0) begin
            v_in   = wload_valid_i;
            k_in   = wload_bank_i;
            row_in = wload_row_idx_i;
            d_in   = wload_row_i[15:0];
          end else begin
            v_in   = wskew_valid_q[c][c - 1];
            k_in   = wskew_bank_q[c][c - 1];
            row_in = wskew_row_q[c][c - 1];
            d_in   = wskew_data_q[c][c - 1];
          end
          // Each PE of the column compares the row index (its write enable): constant indices
          // only, so synthesis sees plain registers rather than a decoded memory.
          for (int r = 0; r < N; r++) begin
            if (v_in && (row_in == RowIdxW'(r))) begin
              if (k_in) weight1_q[r][c] = d_in;
              else weight0_q[r][c] = d_in;
            end
          end
          for (int j = c - 1; j >= 1; j--) begin
            wskew_valid_q[c][j] = wskew_valid_q[c][j - 1];
            wskew_bank_q[c][j]  = wskew_bank_q[c][j - 1];
            wskew_row_q[c][j]   = wskew_row_q[c][j - 1];
            wskew_data_q[c][j]  = wskew_data_q[c][j - 1];
          end
          if (c > 0) begin
            wskew_valid_q[c][0] = wload_valid_i;
            wskew_bank_q[c][0]  = wload_bank_i;
            wskew_row_q[c][0]   = wload_row_idx_i;
            wskew_data_q[c][0]  = wload_row_i[16*c +: 16];
          end
        end
      end
    end
  end

endmodule
