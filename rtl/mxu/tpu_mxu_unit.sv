// tpu_mxu_unit: the MXU as an instruction unit (docs/isa.md, "MXU"; docs/architecture.md, "MXU
// unit"). It takes MXU.LDW and MXU.MM from the sequencer in program order and runs them on a
// tpu_mxu. An LDW becomes a command of N rows for the weight row reader, an MM a command of
// `rows` rows for the activation row reader (tpu_mxu_ub_rows each); each reader has its own UB
// read port (a request held until granted) and feeds the MXU's weight or activation port, so a
// tile loads while the previous MM's rows stream, as far as the weight port's back-pressure
// (one shadow tile) allows: a sequence of tiles of T >= N + 1 rows streams one row a cycle.
// Every MM's first row carries a_first, so it uses the tile of the LDW before it. Latency: an
// MM's first row reaches the array 3 cycles after its instruction is taken (UB granting at
// once), its result lands in the accumulator 2N - 1 cycles after that. Throughput: one UB word
// per granted cycle and port, so one activation row per cycle with 2N <= UbWordBytes and the UB
// granting every cycle (2N / UbWordBytes cycles a row above that). The sequencer has checked
// every range, alignment and the tile count, so the unit never faults; it queues up to LdwDepth
// LDWs beyond the one being read, so a program may leave at most LdwDepth + 1 tiles loaded and
// unused before an MM (one more at N = 4, where the row FIFO holds a whole tile, and one more
// when the tile after the one in the shadow bank is transposed: the transpose buffer holds it);
// more hold the instruction port forever (the ISA allows one: the sequencer limits them).
// idle_o: no instruction in progress and every result written to the accumulator memory.
// rd_idle_o: every UB row of the instructions taken has been read (both readers empty: their
// results may still be in the array) — what a SIGNAL with the reads flag waits for, so a buffer
// the MXU has streamed can be refilled without draining the array. The accumulator ports pass
// through.
`include "tpu_assert.svh"

module tpu_mxu_unit #(
  parameter int unsigned N           = 16,            // array dimension, 4 .. 128
  parameter int unsigned UbBytes     = 262144,        // unified buffer bytes, a power of two
  parameter int unsigned AccRows     = 1024,          // accumulator rows, a power of two
  parameter int unsigned UbWordBytes = 32,            // bytes per UB word
  parameter int unsigned LdwDepth    = 4,             // LDWs queued behind the one being read
  localparam int unsigned UbWordAddrW = $clog2(UbBytes / UbWordBytes),
  localparam int unsigned UbAddrW     = $clog2(UbBytes),
  localparam int unsigned AccAddrW    = $clog2(AccRows)
) (
  input  logic                     clk_i,
  input  logic                     rst_ni,
  input  logic                     clear_i,           // program start (the doorbell)
  // instructions (from the sequencer)
  input  logic                     instr_valid_i,     // instr_i holds an MXU.LDW or MXU.MM
  output logic                     instr_ready_o,     // taken this cycle if valid
  input  logic [127:0]             instr_i,
  output logic                     idle_o,            // nothing in progress, all results written
  output logic                     rd_idle_o,         // every UB operand taken has been read
  // unified buffer read ports (requester ports of tpu_sram_banked): weight rows (MXU.LDW)
  output logic                     w_ub_req_o,        // a word read (held until granted)
  input  logic                     w_ub_gnt_i,        // the read happens this cycle
  output logic [UbWordAddrW-1:0]   w_ub_addr_o,       // UB word index
  input  logic                     w_ub_rvalid_i,     // w_ub_rdata_i: the word granted last cycle
  input  logic [8*UbWordBytes-1:0] w_ub_rdata_i,
  // ... and activation rows (MXU.MM)
  output logic                     a_ub_req_o,
  input  logic                     a_ub_gnt_i,
  output logic [UbWordAddrW-1:0]   a_ub_addr_o,
  input  logic                     a_ub_rvalid_i,
  input  logic [8*UbWordBytes-1:0] a_ub_rdata_i,
  // accumulator read port (VPU.LD acc), tpu_mxu's
  input  logic                     acc_rd_valid_i,
  output logic                     acc_rd_ready_o,
  input  logic [AccAddrW-1:0]      acc_rd_addr_i,
  output logic                     acc_rd_data_valid_o,
  output logic [32*N-1:0]          acc_rd_data_o,     // fp32 word n at bits 32n
  // accumulator write port (VPU.ST acc), waits while array results are written
  input  logic                     acc_wr_valid_i,
  output logic                     acc_wr_ready_o,
  input  logic [AccAddrW-1:0]      acc_wr_addr_i,
  input  logic [32*N-1:0]          acc_wr_data_i,     // fp32 word n at bits 32n
  // activity
  output logic                     mac_row_o          // a row entered the array: N*N MACs
);
  // activation rows: {acc_stride - 1, acc_mode, acc_row}
  localparam int unsigned TagW = 8 + AccAddrW + 1;

  // ---------------------------------------------------------------- decode
  logic [7:0]  opc;
  logic        is_ldw, is_mm, w_cmd_ready, a_cmd_ready;
  logic [31:0] w0, w1, w2, w3;

  assign {w3, w2, w1, w0} = instr_i;
  assign opc    = w0[7:0];
  assign is_ldw = opc == tpu_isa_pkg::OP_MXU_LDW;
  assign is_mm  = opc == tpu_isa_pkg::OP_MXU_MM;
  // Anything else never comes (the sequencer routes only these here); it would be dropped.
  assign instr_ready_o = is_ldw ? w_cmd_ready : (is_mm ? a_cmd_ready : 1'b1);

  // ---------------------------------------------------------------- row readers
  logic                   w_row_valid, w_row_ready, a_row_valid, a_row_ready;
  logic [16*N-1:0]        w_row, a_row;
  logic [15:0]            w_row_idx, a_row_idx;
  logic [0:0]             w_row_tag;
  logic [TagW-1:0]        a_row_tag;
  logic                   w_idle, a_idle;

  tpu_mxu_ub_rows #(
    .N(N), .UbBytes(UbBytes), .UbWordBytes(UbWordBytes), .CmdDepth(LdwDepth), .RowDepth(4),
    .TagW(1)
  ) u_w_rows (
    .clk_i,
    .rst_ni,
    .cmd_valid_i  (instr_valid_i && is_ldw),
    .cmd_ready_o  (w_cmd_ready),
    .cmd_addr_i   (w1[UbAddrW-1:0]),
    .cmd_stride_i (w2[UbAddrW-1:0]),
    .cmd_rows_i   (16'(N)),
    .cmd_tag_i    (w0[8]),                            // a transposed tile
    .rd_req_o     (w_ub_req_o),
    .rd_addr_o    (w_ub_addr_o),
    .rd_gnt_i     (w_ub_gnt_i),
    .rd_valid_i   (w_ub_rvalid_i),
    .rd_data_i    (w_ub_rdata_i),
    .row_valid_o  (w_row_valid),
    .row_ready_i  (w_row_ready),
    .row_o        (w_row),
    .row_idx_o    (w_row_idx),
    .row_tag_o    (w_row_tag),
    .idle_o       (w_idle)
  );

  tpu_mxu_ub_rows #(
    .N(N), .UbBytes(UbBytes), .UbWordBytes(UbWordBytes), .CmdDepth(2), .RowDepth(4),
    .TagW(TagW)
  ) u_a_rows (
    .clk_i,
    .rst_ni,
    .cmd_valid_i  (instr_valid_i && is_mm),
    .cmd_ready_o  (a_cmd_ready),
    .cmd_addr_i   (w1[UbAddrW-1:0]),
    .cmd_stride_i (w2[UbAddrW-1:0]),
    .cmd_rows_i   (w3[15:0]),
    .cmd_tag_i    ({w0[23:16], w0[8], w3[16 +: AccAddrW]}),
    .rd_req_o     (a_ub_req_o),
    .rd_addr_o    (a_ub_addr_o),
    .rd_gnt_i     (a_ub_gnt_i),
    .rd_valid_i   (a_ub_rvalid_i),
    .rd_data_i    (a_ub_rdata_i),
    .row_valid_o  (a_row_valid),
    .row_ready_i  (a_row_ready),
    .row_o        (a_row),
    .row_idx_o    (a_row_idx),
    .row_tag_o    (a_row_tag),
    .idle_o       (a_idle)
  );

  // ---------------------------------------------------------------- transposed tiles
  // An MXU.LDW with the transpose bit: its N rows are collected into tbuf_q (row n at bits
  // [16N n +: 16N]), then row k of the tile — element n = row n's element k — goes to the
  // MXU's weight port, k = 0 … N - 1, one a cycle as the port takes them. Rows of a plain LDW
  // pass straight through, in order: they wait while a transposed tile is emitted. A
  // transposed tile takes 2N cycles of the weight port's path instead of N.
  localparam int unsigned RowIdxW = $clog2(N);
  logic [16*N*N-1:0]  tbuf_q;
  logic               t_full_q;                      // tbuf_q holds a whole tile to emit
  logic [RowIdxW-1:0] t_k_q;                         // the next tile row to emit
  logic [16*N-1:0]    t_row, mxu_w_row;
  logic               mxu_w_valid, mxu_w_ready, t_take;

  always_comb begin
    t_row = '0;
    if (t_full_q) begin  // (used only then: a simulator gathers nothing otherwise)
      for (int n = 0; n < N; n++) t_row[16*n +: 16] = tbuf_q[16*(N*n + 32'(t_k_q)) +: 16];
    end
  end
  assign t_take      = w_row_valid && w_row_tag[0] && !t_full_q;
  assign mxu_w_valid = t_full_q || (w_row_valid && !w_row_tag[0]);
  assign mxu_w_row   = t_full_q ? t_row : w_row;
  assign w_row_ready = !t_full_q && (w_row_tag[0] || mxu_w_ready);

  always_ff @(posedge clk_i) begin
    if (t_take) tbuf_q[16*N*32'(w_row_idx[RowIdxW-1:0]) +: 16*N] <= w_row;
  end
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      t_full_q <= 1'b0;
      t_k_q    <= '0;
    end else if (clear_i) begin                      // between programs: an unused tile drops
      t_full_q <= 1'b0;
      t_k_q    <= '0;
    end else if (t_full_q) begin
      if (mxu_w_ready) begin
        t_k_q <= (t_k_q == RowIdxW'(N - 1)) ? '0 : t_k_q + 1'b1;
        if (t_k_q == RowIdxW'(N - 1)) t_full_q <= 1'b0;
      end
    end else if (t_take && w_row_idx[RowIdxW-1:0] == RowIdxW'(N - 1)) begin
      t_full_q <= 1'b1;
    end
  end

  // ---------------------------------------------------------------- the MXU
  logic                mxu_busy, a_fire;
  logic [AccAddrW-1:0] a_acc_addr;

  // row t of an MXU.MM goes to ACC row acc_row + t acc_stride (the sequencer checked the range)
  assign a_acc_addr = a_row_tag[AccAddrW-1:0] +
                      AccAddrW'(a_row_idx * (16'(a_row_tag[AccAddrW+1 +: 8]) + 16'd1));
  assign a_fire     = a_row_valid && a_row_ready;
  assign mac_row_o  = a_fire;

  tpu_mxu #(.N(N), .AccRows(AccRows)) u_mxu (
    .clk_i,
    .rst_ni,
    .clear_i             (clear_i),
    .w_valid_i           (mxu_w_valid),
    .w_ready_o           (mxu_w_ready),
    .w_row_i             (mxu_w_row),
    .a_valid_i           (a_row_valid),
    .a_ready_o           (a_row_ready),
    .a_row_i             (a_row),
    .a_first_i           (a_row_idx == '0),
    .a_acc_addr_i        (a_acc_addr),
    .a_accumulate_i      (a_row_tag[AccAddrW]),
    .acc_rd_valid_i,
    .acc_rd_ready_o,
    .acc_rd_addr_i,
    .acc_rd_data_valid_o,
    .acc_rd_data_o,
    .acc_wr_valid_i,
    .acc_wr_ready_o,
    .acc_wr_addr_i,
    .acc_wr_data_i,
    .busy_o              (mxu_busy)
  );

  assign idle_o = w_idle && a_idle && !mxu_busy && !t_full_q;
  assign rd_idle_o = w_idle && a_idle;

  // Fields the unit does not read: opcode bits beyond the two MXU opcodes' decode, reserved
  // bits (zero), the high address/stride bits (the sequencer checked the range), the weight
  // reader's row index and tag.
  logic unused_fields;
  assign unused_fields = ^{w0[31:24], w0[15:9], w1[31:UbAddrW], w2[31:UbAddrW], w3[31:16+AccAddrW],
                           w_row_idx[15:RowIdxW]};

  `TPU_ASSERT_IMPLIES(OnlyMxuInstructions, instr_valid_i, (is_ldw || is_mm))
  `TPU_ASSERT_IMPLIES(ClearOnlyWhenIdle, clear_i, idle_o)
  `TPU_ASSERT_IMPLIES(WeightGrantOnlyOnRequest, w_ub_gnt_i, w_ub_req_o)
  `TPU_ASSERT_IMPLIES(ActivationGrantOnlyOnRequest, a_ub_gnt_i, a_ub_req_o)
  // Read data comes exactly the cycle after a grant, on each port.
  logic w_gnt_q, a_gnt_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      w_gnt_q <= 1'b0;
      a_gnt_q <= 1'b0;
    end else begin
      w_gnt_q <= w_ub_gnt_i;
      a_gnt_q <= a_ub_gnt_i;
    end
  end
  `TPU_ASSERT(WeightReadDataOnlyAfterGrant, w_ub_rvalid_i == w_gnt_q)
  `TPU_ASSERT(ActivationReadDataOnlyAfterGrant, a_ub_rvalid_i == a_gnt_q)
  `TPU_ASSERT_NEXT(MacRowMeansArrayBusy, mac_row_o, !idle_o)
endmodule
