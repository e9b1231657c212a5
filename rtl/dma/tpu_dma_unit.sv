// tpu_dma_unit: the DMA as an ISA unit (docs/isa.md, "DMA"). It takes DMA.LOOP and DMA.COPY
// instructions from the sequencer in program order. DMA.LOOP writes two loop registers of one
// walk (count, stride) in the cycle it is taken; DMA.COPY starts tpu_dma with the loop registers
// and its own bases, spaces and element size. DMA.LOOPs are taken while a copy runs (tpu_dma
// holds the copy's own loop settings); the next DMA.COPY is taken when tpu_dma takes it: behind
// the copy in progress once that copy's source walk has ended, if the two may run back to back
// (tpu_dma's conditions), else when the copy has finished (every destination write issued: HBM
// writes are posted, and idle_o waits for both copies and their completions, so a SIGNAL,
// FENCE or HALT still sees every write performed). A copy's fault (range, count mismatch,
// element size, alignment) is reported to the sequencer as FAULT_DMA for one cycle, with the
// copy's PC, the DMA fault code as info and the offending address. clear_i (the doorbell)
// resets the loop registers to count 1, stride 0. A remote copy (w0[11:10] = link, next or
// prev: docs/isa.md, "Multi-chip") writes its destination words to ici_* as flits for that
// link (tpu_ici_pkg) instead of this chip's memories; it has finished when its last flit has
// entered the link's transmit queue (tpu_top), which the link drains while the unit goes on.
`include "tpu_assert.svh"

module tpu_dma_unit #(
  parameter longint unsigned HbmBytes = 64'd1 << 28, // HBM space (Channels x 256 MiB)
  parameter int unsigned     UbBytes  = 262144,      // unified buffer space
  localparam int unsigned    UbAddrW  = $clog2(UbBytes / 32),
  localparam int unsigned    CountW   = 16
) (
  input  logic                clk_i,
  input  logic                rst_ni,
  input  logic                clear_i,              // program start
  // instructions
  input  logic                instr_valid_i,
  output logic                instr_ready_o,
  input  logic [127:0]        instr_i,
  input  logic [31:0]         pc_i,
  output logic                idle_o,               // no copy in progress, HBM writes completed
  output logic                fault_o,              // one cycle: the copy at fault_pc_o faulted
  output logic [3:0]          fault_code_o,         // tpu_isa_pkg::FAULT_DMA
  output logic [31:0]         fault_pc_o,
  output logic [31:0]         fault_addr_o,
  output logic [31:0]         fault_info_o,         // the DMA fault code (tpu_pkg DMA_FAULT_*)
  // HBM port (tpu_hbm's protocol)
  output logic                hbm_req_valid_o,
  input  logic                hbm_req_ready_i,
  output logic                hbm_req_write_o,
  output logic [31:0]         hbm_req_addr_o,
  output logic [3:0]          hbm_req_len_o,
  output logic [3:0]          hbm_req_id_o,
  output logic                hbm_wd_valid_o,
  input  logic                hbm_wd_ready_i,
  output logic [255:0]        hbm_wd_data_o,
  output logic [31:0]         hbm_wd_strb_o,
  input  logic                hbm_rd_valid_i,
  output logic                hbm_rd_ready_o,
  input  logic [3:0]          hbm_rd_id_i,
  input  logic [255:0]        hbm_rd_data_i,
  input  logic                hbm_rd_last_i,
  input  logic                hbm_wr_done_valid_i,
  output logic                hbm_wr_done_ready_o,
  input  logic [3:0]          hbm_wr_done_id_i,
  // unified buffer ports (32-byte words)
  output logic                ub_rreq_o,
  input  logic                ub_rgnt_i,
  output logic [UbAddrW-1:0]  ub_raddr_o,
  input  logic [255:0]        ub_rdata_i,
  output logic                ub_wreq_o,
  input  logic                ub_wgnt_i,
  output logic [UbAddrW-1:0]  ub_waddr_o,
  output logic [31:0]         ub_wmask_o,
  output logic [255:0]        ub_wdata_o,
  // remote writes: one flit per destination word, for link ici_link_o
  output logic                ici_valid_o,
  input  logic                ici_ready_i,
  output logic [1:0]          ici_link_o,           // tpu_isa_pkg::LINK_NEXT / LINK_PREV
  output logic [tpu_ici_pkg::FlitW-1:0] ici_flit_o
);
  // Loop registers: walk w (0 source, 1 destination), loop k at [.. * (4w + k) +: ..].
  logic [8*CountW-1:0] count_q;
  logic [8*33-1:0]     stride_q;                   // signed, sign-extended to 33 bits
  logic [31:0]         pc_q;                       // the oldest copy in progress
  logic [31:0]         pc_next_q;                  // the copy taken behind it
  logic [1:0]          link_q;                     // its destination link (0: this chip)
  logic [1:0]          copies_q;                   // copies taken and not done: 0 .. 2

  logic is_loop, is_copy, take;
  assign is_loop       = instr_i[7:0] == tpu_isa_pkg::OP_DMA_LOOP;
  assign is_copy       = instr_i[7:0] == tpu_isa_pkg::OP_DMA_COPY;
  // No copy is taken in the cycle a copy's fault is reported: the sequencer drops the queued
  // instructions behind a fault (tpu_dma is idle again in that cycle).
  logic desc_ready, fault_now;
  assign instr_ready_o = is_loop || (desc_ready && !fault_now);
  assign take          = instr_valid_i && instr_ready_o;

  logic        busy, done, dma_fault, wr_pending;
  assign fault_now = done && dma_fault;
  logic [3:0]  dma_code;
  logic [32:0] dma_addr;
  logic [31:0] unused_moved;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      count_q   <= {8{16'd1}};
      stride_q  <= '0;
      pc_q      <= '0;
      pc_next_q <= '0;
      link_q    <= '0;
      copies_q  <= '0;
    end else if (clear_i) begin
      count_q   <= {8{16'd1}};
      stride_q  <= '0;
      copies_q  <= '0;
    end else begin
      if (take && is_loop) begin
        // w0[8] walk, w0[9] pair: loops 2p (c0 = w0[31:16], s0 = w1), 2p + 1 (c1 = w2, s1 = w3)
        logic [2:0] lo, hi;
        lo = {instr_i[8], instr_i[9], 1'b0};
        hi = {instr_i[8], instr_i[9], 1'b1};
        count_q[CountW*lo +: CountW]        <= instr_i[31:16];
        stride_q[33*lo +: 33]               <= {instr_i[63], instr_i[63:32]};
        count_q[CountW*hi +: CountW] <= instr_i[79:64];
        stride_q[33*hi +: 33]      <= {instr_i[127], instr_i[127:96]};
      end
      // PCs in order: pc_q is the copy the next done_o reports
      if (take && is_copy) begin
        link_q <= instr_i[11:10];
        if (copies_q == 2'd0 || (copies_q == 2'd1 && done)) pc_q <= pc_i;
        else pc_next_q <= pc_i;
      end else if (done && copies_q == 2'd2) begin
        pc_q <= pc_next_q;
      end
      copies_q <= copies_q + 2'(take && is_copy) - 2'(done);
    end
  end

  assign idle_o       = copies_q == 2'd0 && !wr_pending;  // every HBM write completed
  assign fault_o      = done && dma_fault;
  assign fault_code_o = tpu_isa_pkg::FAULT_DMA;
  assign fault_pc_o   = pc_q;
  assign fault_addr_o = dma_addr[31:0];
  assign fault_info_o = {28'd0, dma_code};

  logic unused_bits;
  assign unused_bits = ^{busy, dma_addr[32], instr_i[95:80], unused_moved};

  logic         rw_space;
  logic [26:0]  rw_word;
  logic [31:0]  rw_strb;
  logic [255:0] rw_data;
  assign ici_link_o = link_q;
  assign ici_flit_o = tpu_ici_pkg::write_flit(rw_space, rw_word, rw_strb, rw_data);

  tpu_dma #(
    .HbmAddrW  (32),
    .HbmBytes  (HbmBytes),
    .SramBytes (UbBytes),
    .MaxReads  (64),
    .MaxWrites (32),                   // tpu_hbm's write tracker per port (WtDepth)
    .PostWrites(1'b1),                 // the next copy starts while HBM completions come back
    .ElemDepth (256)
  ) u_dma (
    .clk_i               (clk_i),
    .rst_ni              (rst_ni),
    .desc_valid_i        (instr_valid_i && is_copy && !fault_now),
    .desc_ready_o        (desc_ready),
    .src_space_i         (instr_i[8]),
    .dst_space_i         (instr_i[9]),
    .dst_remote_i        (instr_i[11:10] != tpu_isa_pkg::LINK_LOCAL),
    .elem_bytes_i        (instr_i[15:12]),
    .src_base_i          (instr_i[63:32]),
    .src_count_i         (count_q[0 +: 4*CountW]),
    .src_stride_i        (stride_q[0 +: 4*33]),
    .dst_base_i          (instr_i[95:64]),
    .dst_count_i         (count_q[4*CountW +: 4*CountW]),
    .dst_stride_i        (stride_q[4*33 +: 4*33]),
    .busy_o              (busy),
    .done_o              (done),
    .wr_pending_o        (wr_pending),
    .fault_o             (dma_fault),
    .fault_code_o        (dma_code),
    .fault_addr_o        (dma_addr),
    .elems_moved_o       (unused_moved),
    .hbm_req_valid_o     (hbm_req_valid_o),
    .hbm_req_ready_i     (hbm_req_ready_i),
    .hbm_req_write_o     (hbm_req_write_o),
    .hbm_req_addr_o      (hbm_req_addr_o),
    .hbm_req_len_o       (hbm_req_len_o),
    .hbm_req_id_o        (hbm_req_id_o),
    .hbm_wd_valid_o      (hbm_wd_valid_o),
    .hbm_wd_ready_i      (hbm_wd_ready_i),
    .hbm_wd_data_o       (hbm_wd_data_o),
    .hbm_wd_strb_o       (hbm_wd_strb_o),
    .hbm_rd_valid_i      (hbm_rd_valid_i),
    .hbm_rd_ready_o      (hbm_rd_ready_o),
    .hbm_rd_id_i         (hbm_rd_id_i),
    .hbm_rd_data_i       (hbm_rd_data_i),
    .hbm_rd_last_i       (hbm_rd_last_i),
    .hbm_wr_done_valid_i (hbm_wr_done_valid_i),
    .hbm_wr_done_ready_o (hbm_wr_done_ready_o),
    .hbm_wr_done_id_i    (hbm_wr_done_id_i),
    .sram_rreq_o         (ub_rreq_o),
    .sram_rgnt_i         (ub_rgnt_i),
    .sram_raddr_o        (ub_raddr_o),
    .sram_rdata_i        (ub_rdata_i),
    .sram_wreq_o         (ub_wreq_o),
    .sram_wgnt_i         (ub_wgnt_i),
    .sram_waddr_o        (ub_waddr_o),
    .sram_wmask_o        (ub_wmask_o),
    .sram_wdata_o        (ub_wdata_o),
    .remote_w_valid_o    (ici_valid_o),
    .remote_w_ready_i    (ici_ready_i),
    .remote_w_space_o    (rw_space),
    .remote_w_word_o     (rw_word),
    .remote_w_strb_o     (rw_strb),
    .remote_w_data_o     (rw_data)
  );

  `TPU_ASSERT_IMPLIES(ClearOnlyWhenIdle, clear_i, copies_q == 2'd0)
  `TPU_ASSERT_IMPLIES(DoneOnlyForACopy, done, copies_q != 2'd0)
endmodule
