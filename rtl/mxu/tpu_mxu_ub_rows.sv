// tpu_mxu_ub_rows: reads rows of 2N bf16 bytes from the unified buffer for tpu_mxu_unit; one
// instance streams weight rows (MXU.LDW), another activation rows (MXU.MM). Commands (row 0's
// byte address, a byte stride, a row count and a tag passed through) wait in a CmdDepth-entry
// queue; the head command's rows are read in order, one UB word per granted request: a row of
// 2N <= UbWordBytes bytes is one word (the row at byte offset addr mod UbWordBytes of it), a
// longer row is 2N / UbWordBytes consecutive words read one after another. A row's first word
// is requested only while the RowDepth-entry row FIFO has room for the row, counting rows whose
// words are still in flight, so every returned word has a place. Rows leave in order with
// their index t within the command and the command's tag. Latency: a row whose last word is
// granted in cycle c is at the head (row_valid_o) in cycle c + 2. Throughput: one UB word per
// granted cycle; one row per cycle for 2N <= UbWordBytes with RowDepth >= 3. A request, once
// raised, stays raised with the same address until granted (the UB port protocol).
`include "tpu_assert.svh"

module tpu_mxu_ub_rows #(
  parameter int unsigned N           = 16,            // bf16 elements per row
  parameter int unsigned UbBytes     = 262144,        // unified buffer bytes, a power of two
  parameter int unsigned UbWordBytes = 32,            // bytes per UB word
  parameter int unsigned CmdDepth    = 2,             // queued commands, a power of two >= 2
  parameter int unsigned RowDepth    = 4,             // row FIFO entries, a power of two >= 2
  parameter int unsigned TagW        = 1,             // bits of the tag passed through
  localparam int unsigned UbAddrW     = $clog2(UbBytes),
  localparam int unsigned UbWordAddrW = $clog2(UbBytes / UbWordBytes),
  localparam int unsigned RowW        = 16 * N,
  localparam int unsigned WordW       = 8 * UbWordBytes
) (
  input  logic                   clk_i,
  input  logic                   rst_ni,
  // commands
  input  logic                   cmd_valid_i,         // a command to queue
  output logic                   cmd_ready_o,         // queued this cycle if valid
  input  logic [UbAddrW-1:0]     cmd_addr_i,          // byte address of row 0, 2N-aligned
  input  logic [UbAddrW-1:0]     cmd_stride_i,        // byte stride, two's complement mod UbBytes
  input  logic [15:0]            cmd_rows_i,          // rows, 1 .. 65535
  input  logic [TagW-1:0]        cmd_tag_i,           // returned with each of its rows
  // UB word reads (the caller arbitrates)
  output logic                   rd_req_o,            // a read of rd_addr_o (held until granted)
  output logic [UbWordAddrW-1:0] rd_addr_o,           // UB word index
  input  logic                   rd_gnt_i,            // this reader's read happens this cycle
  input  logic                   rd_valid_i,          // rd_data_i: the word granted last cycle
  input  logic [WordW-1:0]       rd_data_i,
  // rows out
  output logic                   row_valid_o,         // row_o holds the next row
  input  logic                   row_ready_i,         // taken this cycle if valid
  output logic [RowW-1:0]        row_o,               // bf16 element i at bits 16i
  output logic [15:0]            row_idx_o,           // t: the row's index in its command
  output logic [TagW-1:0]        row_tag_o,           // its command's tag
  // status
  output logic                   idle_o               // no command queued, no row held
);
  localparam int unsigned RowBytes    = 2 * N;
  localparam int unsigned WordsPerRow = (RowBytes > UbWordBytes) ? RowBytes / UbWordBytes : 1;
  localparam int unsigned RowsPerWord = (RowBytes < UbWordBytes) ? UbWordBytes / RowBytes : 1;
  localparam int unsigned WordIdxW    = (WordsPerRow > 1) ? $clog2(WordsPerRow) : 1;
  localparam int unsigned SlotW       = (RowsPerWord > 1) ? $clog2(RowsPerWord) : 1;
  localparam int unsigned OffW        = $clog2(UbWordBytes);
  localparam int unsigned CmdW        = 2 * UbAddrW + 16 + TagW;
  localparam int unsigned EntW        = RowW + 16 + TagW;
  localparam int unsigned RowCntW     = $clog2(RowDepth) + 1;

  // ---------------------------------------------------------------- command queue
  logic               cmd_full, cmd_empty, cmd_pop;
  logic [$clog2(CmdDepth):0] cmd_count;               // (unused but for the idle check)
  logic [CmdW-1:0]    head;
  logic [UbAddrW-1:0] h_addr, h_stride;
  logic [15:0]        h_rows;
  logic [TagW-1:0]    h_tag;

  assign cmd_ready_o = !cmd_full;
  tpu_dma_fifo #(.Width(CmdW), .Depth(CmdDepth)) u_cmd_q (
    .clk_i,
    .rst_ni,
    .push_i  (cmd_valid_i && !cmd_full),
    .data_i  ({cmd_tag_i, cmd_rows_i, cmd_stride_i, cmd_addr_i}),
    .full_o  (cmd_full),
    .pop_i   (cmd_pop),
    .data_o  (head),
    .empty_o (cmd_empty),
    .count_o (cmd_count)
  );
  assign {h_tag, h_rows, h_stride, h_addr} = head;

  // ---------------------------------------------------------------- address walk
  logic [15:0]          t_q;                          // row being read in the head command
  logic [WordIdxW-1:0]  word_q;                       // its next word (multi-word rows)
  logic [UbAddrW-1:0]   addr_q;                       // byte address of row t_q (t_q > 0)
  logic [RowCntW-1:0]   rows_q;                       // rows reserved: first word granted, not out
  logic [UbAddrW-1:0]   row_addr;
  logic                 first_word, last_word, last_row, row_out;

  assign row_addr   = (t_q == '0) ? h_addr : addr_q;
  assign first_word = word_q == '0;
  assign last_word  = word_q == WordIdxW'(WordsPerRow - 1);
  assign last_row   = t_q == h_rows - 16'd1;
  assign rd_req_o   = !cmd_empty && (!first_word || rows_q < RowCntW'(RowDepth));
  assign rd_addr_o  = UbWordAddrW'(row_addr >> OffW) + UbWordAddrW'(word_q);
  assign cmd_pop    = rd_gnt_i && last_word && last_row;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      t_q    <= '0;
      word_q <= '0;
      addr_q <= '0;
      rows_q <= '0;
    end else begin
      if (rd_gnt_i) begin
        if (!last_word) begin
          word_q <= word_q + 1'b1;
        end else begin
          word_q <= '0;
          t_q    <= last_row ? '0 : t_q + 16'd1;
          addr_q <= row_addr + h_stride;
        end
      end
      rows_q <= rows_q + RowCntW'(rd_gnt_i && first_word) - RowCntW'(row_out);
    end
  end

  // ---------------------------------------------------------------- returning words
  // One read is granted per cycle at most and returns the next cycle: one register describes it.
  logic [SlotW-1:0]    ret_slot_q;                    // row's slot in the word (short rows)
  logic [WordIdxW-1:0] ret_word_q;                    // word's place in the row (long rows)
  logic                ret_last_q;                    // the row's last word
  logic [15:0]         ret_t_q;
  logic [TagW-1:0]     ret_tag_q;
  logic [RowW-1:0]     asm_row;                       // the row with this word put in

  always_ff @(posedge clk_i) begin
    if (rd_gnt_i) begin
      ret_slot_q <= SlotW'(row_addr[OffW-1:0] >> $clog2(RowBytes));
      ret_word_q <= word_q;
      ret_last_q <= last_word;
      ret_t_q    <= t_q;
      ret_tag_q  <= h_tag;
    end
  end

  if (WordsPerRow > 1) begin : g_long_rows
    logic [RowW-1:0] stage_q;                         // words of the row so far
    always_comb begin
      asm_row = stage_q;
      asm_row[WordW*ret_word_q +: WordW] = rd_data_i;
    end
    always_ff @(posedge clk_i) begin
      if (rd_valid_i) stage_q <= asm_row;
    end
    logic unused_slot;
    assign unused_slot = ^ret_slot_q;
  end else begin : g_short_rows
    assign asm_row = rd_data_i[RowW*ret_slot_q +: RowW];
    logic unused_word;
    assign unused_word = ^ret_word_q;
  end

  // ---------------------------------------------------------------- row FIFO
  logic            fifo_full, fifo_empty;
  logic [RowCntW-1:0] fifo_count;
  logic [EntW-1:0] fifo_head;

  assign row_out = row_valid_o && row_ready_i;
  tpu_dma_fifo #(.Width(EntW), .Depth(RowDepth)) u_row_q (
    .clk_i,
    .rst_ni,
    .push_i  (rd_valid_i && ret_last_q),
    .data_i  ({ret_tag_q, ret_t_q, asm_row}),
    .full_o  (fifo_full),
    .pop_i   (row_out),
    .data_o  (fifo_head),
    .empty_o (fifo_empty),
    .count_o (fifo_count)
  );
  assign row_valid_o = !fifo_empty;
  assign {row_tag_o, row_idx_o, row_o} = fifo_head;

  assign idle_o = cmd_empty && (rows_q == '0);

  `TPU_ASSERT_IMPLIES(GrantOnlyOnRequest, rd_gnt_i, rd_req_o)
  `TPU_ASSERT(RowsReservedBounded, rows_q <= RowCntW'(RowDepth))
  `TPU_ASSERT(FifoHoldsOnlyReservedRows, fifo_count <= rows_q)
  `TPU_ASSERT_IMPLIES(IdleMeansNoCommand, idle_o, (cmd_count == '0))
  `TPU_ASSERT_IMPLIES(ReturnedRowHasRoom, (rd_valid_i && ret_last_q), !fifo_full)
  `TPU_ASSERT_IMPLIES(CommandHasRows, !cmd_empty, (h_rows != '0))
  `TPU_ASSERT_HELD(RequestHeldUntilGranted, rd_req_o, rd_gnt_i, rd_addr_o)
endmodule
