// tpu_top: the Tessera chip. The host reaches it through two ports: the CSR port (doorbell,
// status, faults, interrupts, performance counters: tpu_csr) and a memory port into HBM (port 2
// of tpu_hbm, for loading programs and data, behind a register slice per channel: one cycle
// each way, no combinational path from a host pin inward). A program runs as docs/isa.md defines: the
// sequencer (tpu_seq) fetches it through HBM port 0 and hands instructions to the DMA unit
// (tpu_dma_unit, HBM port 1 and two unified-buffer ports), the MXU unit (tpu_mxu_unit: weight and
// activation rows from the unified buffer, results in its accumulator memory) and the VPU
// (tpu_vpu: the unified buffer through tpu_ub_port, the accumulator through the MXU unit's
// ports). The unified buffer is tpu_sram_banked: 4 word-interleaved banks of 32-byte words, one
// port each for DMA reads, DMA writes, the MXU's activation rows (granted first: its row stream
// never waits), the MXU's weight rows (so a tile loads beside the stream), and two for the VPU
// (a 4N-byte access's two words at N = 16 in one cycle). The HBM
// device pins of every
// pseudo-channel leave the chip for the device model. Two ICI link ports (tpu_ici_port: next
// and prev ring neighbours) leave the chip as wires: remote DMA copies and remote SIGNALs go
// out on them (tpu_dma_unit, tpu_seq), and what the neighbours send arrives through
// tpu_ici_rx into this chip's UB (a fifth UB port), HBM (a fourth memory port) and remote
// counters. link_up_i tells the sequencer which links have a chip at the other end (through a
// two-flop synchronizer).
module tpu_top #(
  parameter int unsigned N        = tpu_pkg::CHIP_N,         // MXU size = VPU lanes
  parameter int unsigned UbBytes  = tpu_pkg::CHIP_UB_BYTES,  // unified buffer
  parameter int unsigned AccRows  = tpu_pkg::CHIP_ACC_ROWS,  // accumulator rows
  parameter int unsigned Channels = 1,              // HBM pseudo-channels (256 MiB each)
  parameter int unsigned QDepth   = tpu_pkg::QUEUE_DEPTH,    // per-unit instruction queues
  parameter int unsigned FetchDepth = tpu_pkg::FETCH_DEPTH,  // instructions fetched ahead
  parameter int unsigned TREFI    = tpu_pkg::HBM_TREFI,      // HBM refresh (tests shorten it)
  parameter int unsigned LinkBytes = tpu_pkg::ICI_LINK_BYTES,  // ICI: bytes a link carries a cycle
  parameter int unsigned LinkCredits = 64,          // ICI: receive buffer per link (flits)
  parameter int unsigned LinkTxFlits = 256,         // ICI: transmit queue per link (flits)
  localparam int unsigned FlitW   = tpu_ici_pkg::FlitW,
  localparam int unsigned UbWAddrW = $clog2(UbBytes / 32),
  localparam int unsigned AccAddrW = $clog2(AccRows)
) (
  input  logic                    clk_i,
  input  logic                    rst_ni,
  // CSR port
  input  logic                    csr_valid_i,
  input  logic                    csr_write_i,
  input  logic [11:0]             csr_addr_i,
  input  logic [31:0]             csr_wdata_i,
  output logic [31:0]             csr_rdata_o,
  output logic                    irq_o,
  // host memory port (tpu_hbm's port protocol)
  input  logic                    host_req_valid_i,
  output logic                    host_req_ready_o,
  input  logic                    host_req_write_i,
  input  logic [31:0]             host_req_addr_i,
  input  logic [3:0]              host_req_len_i,
  input  logic [3:0]              host_req_id_i,
  input  logic                    host_wd_valid_i,
  output logic                    host_wd_ready_o,
  input  logic [255:0]            host_wd_data_i,
  input  logic [31:0]             host_wd_strb_i,
  output logic                    host_rd_valid_o,
  input  logic                    host_rd_ready_i,
  output logic [3:0]              host_rd_id_o,
  output logic [255:0]            host_rd_data_o,
  output logic                    host_rd_last_o,
  output logic                    host_rd_err_o,
  output logic                    host_wr_done_valid_o,
  input  logic                    host_wr_done_ready_i,
  output logic [3:0]              host_wr_done_id_o,
  output logic                    host_wr_done_err_o,
  // HBM device pins, per pseudo-channel (as tpu_hbm)
  output logic [Channels-1:0]     cmd_valid_o,
  output logic [Channels*3-1:0]   cmd_o,
  output logic [Channels*2-1:0]   bg_o,
  output logic [Channels*2-1:0]   bank_o,
  output logic [Channels*14-1:0]  row_o,
  output logic [Channels*5-1:0]   col_o,
  output logic [Channels-1:0]     wdata_valid_o,
  output logic [Channels*128-1:0] wdata_o,
  output logic [Channels*16-1:0]  wdata_strb_o,
  input  logic [Channels-1:0]     rdata_valid_i,
  input  logic [Channels*128-1:0] rdata_i,
  // ICI links, per link l (0 next, 1 prev) at [.. * l +: ..]: tpu_ici_port's wire side
  input  logic [1:0]              link_up_i,
  output logic [1:0]              ici_tx_valid_o,
  output logic [2*FlitW-1:0]      ici_tx_flit_o,
  input  logic [1:0]              ici_credit_i,
  input  logic [1:0]              ici_rx_valid_i,
  input  logic [2*FlitW-1:0]      ici_rx_flit_i,
  output logic [1:0]              ici_credit_o
);
  localparam int unsigned Ports = 4;                // 0 fetch, 1 DMA, 2 host, 3 ICI receive

  // ---------------------------------------------------------------- memory system
  logic [Ports-1:0]      m_req_valid, m_req_ready, m_req_write, m_wd_valid, m_wd_ready;
  logic [Ports*32-1:0]   m_req_addr, m_wd_strb;
  logic [Ports*4-1:0]    m_req_len, m_req_id, m_rd_id, m_wr_done_id;
  logic [Ports*256-1:0]  m_wd_data, m_rd_data;
  logic [Ports-1:0]      m_rd_valid, m_rd_ready, m_rd_last, m_rd_err;
  logic [Ports-1:0]      m_wr_done_valid, m_wr_done_ready, m_wr_done_err;
  logic                  hbm_busy;

  tpu_hbm #(.Channels(Channels), .Ports(Ports), .TREFI(TREFI)) u_hbm (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .req_valid_i     (m_req_valid),
    .req_ready_o     (m_req_ready),
    .req_write_i     (m_req_write),
    .req_addr_i      (m_req_addr),
    .req_len_i       (m_req_len),
    .req_id_i        (m_req_id),
    .wd_valid_i      (m_wd_valid),
    .wd_ready_o      (m_wd_ready),
    .wd_data_i       (m_wd_data),
    .wd_strb_i       (m_wd_strb),
    .rd_valid_o      (m_rd_valid),
    .rd_ready_i      (m_rd_ready),
    .rd_id_o         (m_rd_id),
    .rd_data_o       (m_rd_data),
    .rd_last_o       (m_rd_last),
    .rd_err_o        (m_rd_err),
    .wr_done_valid_o (m_wr_done_valid),
    .wr_done_ready_i (m_wr_done_ready),
    .wr_done_id_o    (m_wr_done_id),
    .wr_done_err_o   (m_wr_done_err),
    .cmd_valid_o     (cmd_valid_o),
    .cmd_o           (cmd_o),
    .bg_o            (bg_o),
    .bank_o          (bank_o),
    .row_o           (row_o),
    .col_o           (col_o),
    .wdata_valid_o   (wdata_valid_o),
    .wdata_o         (wdata_o),
    .wdata_strb_o    (wdata_strb_o),
    .rdata_valid_i   (rdata_valid_i),
    .rdata_i         (rdata_i),
    .busy_o          (hbm_busy)
  );

  // Port 2: the host, behind a register slice on each of its four channels (one cycle each
  // way): no path from a host pin into the memory system within a cycle. The verilated model
  // gains most: Verilator re-evaluates all logic that depends on a top input on every eval(),
  // and without the slices that was the crossbar's arbitration and the controller's hazard
  // check (docs/performance.md, "Simulation speed of the chip").
  tpu_reg_slice #(.Width(41)) u_host_req (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  (host_req_valid_i),
    .in_ready_o  (host_req_ready_o),
    .in_data_i   ({host_req_write_i, host_req_addr_i, host_req_len_i, host_req_id_i}),
    .out_valid_o (m_req_valid[2]),
    .out_ready_i (m_req_ready[2]),
    .out_data_o  ({m_req_write[2], m_req_addr[64 +: 32], m_req_len[8 +: 4], m_req_id[8 +: 4]})
  );
  tpu_reg_slice #(.Width(288)) u_host_wd (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  (host_wd_valid_i),
    .in_ready_o  (host_wd_ready_o),
    .in_data_i   ({host_wd_data_i, host_wd_strb_i}),
    .out_valid_o (m_wd_valid[2]),
    .out_ready_i (m_wd_ready[2]),
    .out_data_o  ({m_wd_data[512 +: 256], m_wd_strb[64 +: 32]})
  );
  tpu_reg_slice #(.Width(262)) u_host_rd (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  (m_rd_valid[2]),
    .in_ready_o  (m_rd_ready[2]),
    .in_data_i   ({m_rd_id[8 +: 4], m_rd_data[512 +: 256], m_rd_last[2], m_rd_err[2]}),
    .out_valid_o (host_rd_valid_o),
    .out_ready_i (host_rd_ready_i),
    .out_data_o  ({host_rd_id_o, host_rd_data_o, host_rd_last_o, host_rd_err_o})
  );
  tpu_reg_slice #(.Width(5)) u_host_wr_done (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  (m_wr_done_valid[2]),
    .in_ready_o  (m_wr_done_ready[2]),
    .in_data_i   ({m_wr_done_id[8 +: 4], m_wr_done_err[2]}),
    .out_valid_o (host_wr_done_valid_o),
    .out_ready_i (host_wr_done_ready_i),
    .out_data_o  ({host_wr_done_id_o, host_wr_done_err_o})
  );

  // ---------------------------------------------------------------- control
  logic        start;
  logic [31:0] prog_addr;
  logic [1:0]  status;
  logic        done, fault_event, irq_user, abort, running, retired;
  logic [3:0]  fault_code;
  logic [31:0] fault_pc, fault_addr, fault_info, irq_code;
  logic [2:0]  u_valid, u_ready, u_idle, u_fault, u_busy, u_stall;
  logic        mxu_rd_idle;  // the MXU has read every UB operand it took (SIGNAL ..., reads)
  logic [3*128-1:0] u_instr;
  logic [3*32-1:0]  u_pc, u_fault_pc, u_fault_addr, u_fault_info;
  logic        rsig_valid, rsig_ready, rc_inc, tx_idle;
  logic [1:0]  rsig_link;
  logic [3:0]  rsig_sc, rc_sc;
  logic [3*4-1:0]   u_fault_code;
  logic        fetch_req_valid, fetch_rd_ready;
  logic [11:0] unit_state;
  logic [31:0] seq_pc;
  logic [31:0] fetch_req_addr;

  // link_up_i is the links' status from outside the chip (asynchronous to clk_i): a two-flop
  // synchronizer before the sequencer's decode reads it (which also keeps the decode out of
  // the logic a verilated model re-evaluates whenever a top input may have changed).
  logic [1:0] link_up_meta_q, link_up_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      link_up_meta_q <= '0;
      link_up_q      <= '0;
    end else begin
      link_up_meta_q <= link_up_i;
      link_up_q      <= link_up_meta_q;
    end
  end

  // A deep fetch buffer: a compiled training step is ~10^6 straight-line instructions, and with
  // 8 entries (3 bursts in flight) the fetch, not the units, set the pace (docs/performance.md).
  tpu_seq #(.N(N), .UbBytes(UbBytes), .AccRows(AccRows), .QDepth(QDepth),
            .FetchDepth(FetchDepth)) u_seq (
    .clk_i             (clk_i),
    .rst_ni            (rst_ni),
    .start_i           (start),
    .prog_addr_i       (prog_addr),
    .status_o          (status),
    .done_o            (done),
    .fault_event_o     (fault_event),
    .fault_code_o      (fault_code),
    .fault_pc_o        (fault_pc),
    .fault_addr_o      (fault_addr),
    .fault_info_o      (fault_info),
    .irq_user_o        (irq_user),
    .irq_code_o        (irq_code),
    .fetch_req_valid_o (fetch_req_valid),
    .fetch_req_ready_i (m_req_ready[0]),
    .fetch_req_addr_o  (fetch_req_addr),
    .fetch_rd_valid_i  (m_rd_valid[0]),
    .fetch_rd_ready_o  (fetch_rd_ready),
    .fetch_rd_data_i   (m_rd_data[0 +: 256]),
    .fetch_rd_err_i    (m_rd_err[0]),
    .unit_valid_o      (u_valid),
    .unit_ready_i      (u_ready),
    .unit_instr_o      (u_instr),
    .unit_pc_o         (u_pc),
    .unit_idle_i       (u_idle),
    .unit_rd_idle_i    ({u_idle[2], mxu_rd_idle, u_idle[0]}),  // the DMA and VPU: when idle
    .unit_fault_i      (u_fault),
    .unit_fault_code_i (u_fault_code),
    .unit_fault_pc_i   (u_fault_pc),
    .unit_fault_addr_i (u_fault_addr),
    .unit_fault_info_i (u_fault_info),
    .link_up_i         (link_up_q),
    .rsig_valid_o      (rsig_valid),
    .rsig_link_o       (rsig_link),
    .rsig_sc_o         (rsig_sc),
    .rsig_ready_i      (rsig_ready),
    .tx_idle_i         (tx_idle),
    .rc_inc_i          (rc_inc),
    .rc_sc_i           (rc_sc),
    .abort_o           (abort),
    .running_o         (running),
    .unit_busy_o       (u_busy),
    .unit_stall_o      (u_stall),
    .instr_retired_o   (retired),
    .unit_state_o      (unit_state),
    .pc_o              (seq_pc)
  );

  // Port 0: instruction fetch (reads only).
  assign m_req_valid[0]       = fetch_req_valid;
  assign m_req_write[0]       = 1'b0;
  assign m_req_addr[0 +: 32]  = fetch_req_addr;
  assign m_req_len[0 +: 4]    = 4'd0;
  assign m_req_id[0 +: 4]     = 4'd0;
  assign m_wd_valid[0]        = 1'b0;
  assign m_wd_data[0 +: 256]  = '0;
  assign m_wd_strb[0 +: 32]   = '0;
  assign m_rd_ready[0]        = fetch_rd_ready;
  assign m_wr_done_ready[0]   = 1'b1;

  // HBM activity for the counters: bursts through every port, column commands and ACTs.
  logic [7:0] rd_bursts, wr_bursts, col_cmds, acts;
  always_comb begin
    rd_bursts = '0;
    wr_bursts = '0;
    col_cmds  = '0;
    acts      = '0;
    for (int p = 0; p < Ports; p++) begin
      rd_bursts = rd_bursts + 8'(m_rd_valid[p] && m_rd_ready[p]);
      wr_bursts = wr_bursts + 8'(m_wd_valid[p] && m_wd_ready[p]);
    end
    for (int c = 0; c < Channels; c++) begin
      col_cmds = col_cmds + 8'(cmd_valid_o[c] && (cmd_o[3*c +: 3] == 3'd1 || cmd_o[3*c +: 3] == 3'd2));
      acts     = acts + 8'(cmd_valid_o[c] && cmd_o[3*c +: 3] == 3'd0);
    end
  end

  logic mac_row;
  tpu_csr #(.N(N), .UbBytes(UbBytes), .AccRows(AccRows), .QDepth(QDepth), .Channels(Channels))
  u_csr (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .csr_valid_i     (csr_valid_i),
    .csr_write_i     (csr_write_i),
    .csr_addr_i      (csr_addr_i),
    .csr_wdata_i     (csr_wdata_i),
    .csr_rdata_o     (csr_rdata_o),
    .start_o         (start),
    .prog_addr_o     (prog_addr),
    .status_i        (status),
    .fault_code_i    (fault_code),
    .fault_pc_i      (fault_pc),
    .fault_addr_i    (fault_addr),
    .fault_info_i    (fault_info),
    .done_i          (done),
    .fault_event_i   (fault_event),
    .irq_user_i      (irq_user),
    .irq_code_i      (irq_code),
    .running_i       (running),
    .unit_busy_i     (u_busy),
    .unit_stall_i    (u_stall),
    .mxu_row_i       (mac_row),
    .hbm_rd_bursts_i (rd_bursts),
    .hbm_wr_bursts_i (wr_bursts),
    .col_cmds_i      (col_cmds),
    .acts_i          (acts),
    .instr_retired_i (retired),
    .unit_state_i    (unit_state),
    .pc_i            (seq_pc),
    .irq_o           (irq_o)
  );

  // ---------------------------------------------------------------- unified buffer
  localparam int unsigned UbPorts = 7;              // 0 DMA read, 1 DMA write, 2 MXU
                                                    // activations, 3 VPU (even words),
                                                    // 4 ICI receive, 5 MXU weights,
                                                    // 6 VPU (odd words)
  logic [UbPorts-1:0]          ub_req, ub_gnt, ub_we, ub_rvalid;
  logic [UbPorts*UbWAddrW-1:0] ub_addr;
  logic [UbPorts*32-1:0]       ub_wmask;
  logic [UbPorts*256-1:0]      ub_wdata, ub_rdata;

  // Units read whole 32-byte words of which they use a part (an MXU row of 2N bytes, a DMA
  // element), so the macros' word-level never-written check is off here; the functional model
  // checks undefined reads byte by byte (docs/isa.md: UB contents are undefined until written).
  tpu_sram_banked #(
    .Banks(4), .Words(UbBytes / 32), .Elems(32), .ElemW(8), .Ports(UbPorts),
    .CheckUnwritten(1'b0), .FirstPort(2)
  ) u_ub (
    .clk_i    (clk_i),
    .rst_ni   (rst_ni),
    .req_i    (ub_req),
    .gnt_o    (ub_gnt),
    .we_i     (ub_we),
    .addr_i   (ub_addr),
    .wmask_i  (ub_wmask),
    .wdata_i  (ub_wdata),
    .rvalid_o (ub_rvalid),
    .rdata_o  (ub_rdata)
  );

  // ---------------------------------------------------------------- DMA unit
  logic dma_rreq, dma_wreq;
  logic [UbWAddrW-1:0] dma_raddr, dma_waddr;
  logic [31:0]  dma_wmask;
  logic [255:0] dma_wdata;
  logic         dma_ici_valid, dma_ici_ready;
  logic [1:0]   dma_ici_link;
  logic [FlitW-1:0] dma_ici_flit;
  tpu_dma_unit #(.HbmBytes(64'(Channels) << 28), .UbBytes(UbBytes)) u_dma (
    .clk_i               (clk_i),
    .rst_ni              (rst_ni),
    .clear_i             (start),
    .instr_valid_i       (u_valid[0]),
    .instr_ready_o       (u_ready[0]),
    .instr_i             (u_instr[0 +: 128]),
    .pc_i                (u_pc[0 +: 32]),
    .idle_o              (u_idle[0]),
    .fault_o             (u_fault[0]),
    .fault_code_o        (u_fault_code[0 +: 4]),
    .fault_pc_o          (u_fault_pc[0 +: 32]),
    .fault_addr_o        (u_fault_addr[0 +: 32]),
    .fault_info_o        (u_fault_info[0 +: 32]),
    .hbm_req_valid_o     (m_req_valid[1]),
    .hbm_req_ready_i     (m_req_ready[1]),
    .hbm_req_write_o     (m_req_write[1]),
    .hbm_req_addr_o      (m_req_addr[32 +: 32]),
    .hbm_req_len_o       (m_req_len[4 +: 4]),
    .hbm_req_id_o        (m_req_id[4 +: 4]),
    .hbm_wd_valid_o      (m_wd_valid[1]),
    .hbm_wd_ready_i      (m_wd_ready[1]),
    .hbm_wd_data_o       (m_wd_data[256 +: 256]),
    .hbm_wd_strb_o       (m_wd_strb[32 +: 32]),
    .hbm_rd_valid_i      (m_rd_valid[1]),
    .hbm_rd_ready_o      (m_rd_ready[1]),
    .hbm_rd_id_i         (m_rd_id[4 +: 4]),
    .hbm_rd_data_i       (m_rd_data[256 +: 256]),
    .hbm_rd_last_i       (m_rd_last[1]),
    .hbm_wr_done_valid_i (m_wr_done_valid[1]),
    .hbm_wr_done_ready_o (m_wr_done_ready[1]),
    .hbm_wr_done_id_i    (m_wr_done_id[4 +: 4]),
    .ub_rreq_o           (dma_rreq),
    .ub_rgnt_i           (ub_gnt[0]),
    .ub_raddr_o          (dma_raddr),
    .ub_rdata_i          (ub_rdata[0 +: 256]),
    .ub_wreq_o           (dma_wreq),
    .ub_wgnt_i           (ub_gnt[1]),
    .ub_waddr_o          (dma_waddr),
    .ub_wmask_o          (dma_wmask),
    .ub_wdata_o          (dma_wdata),
    .ici_valid_o         (dma_ici_valid),
    .ici_ready_i         (dma_ici_ready),
    .ici_link_o          (dma_ici_link),
    .ici_flit_o          (dma_ici_flit)
  );
  assign ub_req[0] = dma_rreq;
  assign ub_we[0]  = 1'b0;
  assign ub_addr[0 +: UbWAddrW] = dma_raddr;
  assign ub_wmask[0 +: 32]  = '0;
  assign ub_wdata[0 +: 256] = '0;
  assign ub_req[1] = dma_wreq;
  assign ub_we[1]  = 1'b1;
  assign ub_addr[UbWAddrW +: UbWAddrW] = dma_waddr;
  assign ub_wmask[32 +: 32]   = dma_wmask;
  assign ub_wdata[256 +: 256] = dma_wdata;

  // ---------------------------------------------------------------- MXU unit
  logic                acc_rd_valid, acc_rd_ready, acc_rd_data_valid;
  logic                acc_wr_valid, acc_wr_ready;
  logic [AccAddrW-1:0] acc_rd_addr, acc_wr_addr;
  logic [32*N-1:0]     acc_rd_data, acc_wr_data;
  logic                mxu_ub_req, mxu_w_ub_req;
  logic [UbWAddrW-1:0] mxu_ub_addr, mxu_w_ub_addr;

  tpu_mxu_unit #(.N(N), .UbBytes(UbBytes), .AccRows(AccRows)) u_mxu (
    .clk_i               (clk_i),
    .rst_ni              (rst_ni),
    .clear_i             (start),
    .instr_valid_i       (u_valid[1]),
    .instr_ready_o       (u_ready[1]),
    .instr_i             (u_instr[128 +: 128]),
    .idle_o              (u_idle[1]),
    .rd_idle_o           (mxu_rd_idle),
    .w_ub_req_o          (mxu_w_ub_req),
    .w_ub_gnt_i          (ub_gnt[5]),
    .w_ub_addr_o         (mxu_w_ub_addr),
    .w_ub_rvalid_i       (ub_rvalid[5]),
    .w_ub_rdata_i        (ub_rdata[1280 +: 256]),
    .a_ub_req_o          (mxu_ub_req),
    .a_ub_gnt_i          (ub_gnt[2]),
    .a_ub_addr_o         (mxu_ub_addr),
    .a_ub_rvalid_i       (ub_rvalid[2]),
    .a_ub_rdata_i        (ub_rdata[512 +: 256]),
    .acc_rd_valid_i      (acc_rd_valid),
    .acc_rd_ready_o      (acc_rd_ready),
    .acc_rd_addr_i       (acc_rd_addr),
    .acc_rd_data_valid_o (acc_rd_data_valid),
    .acc_rd_data_o       (acc_rd_data),
    .acc_wr_valid_i      (acc_wr_valid),
    .acc_wr_ready_o      (acc_wr_ready),
    .acc_wr_addr_i       (acc_wr_addr),
    .acc_wr_data_i       (acc_wr_data),
    .mac_row_o           (mac_row)
  );
  assign ub_req[2] = mxu_ub_req;
  assign ub_we[2]  = 1'b0;
  assign ub_addr[2*UbWAddrW +: UbWAddrW] = mxu_ub_addr;
  assign ub_wmask[64 +: 32]   = '0;
  assign ub_wdata[512 +: 256] = '0;
  assign ub_req[5] = mxu_w_ub_req;
  assign ub_we[5]  = 1'b0;
  assign ub_addr[5*UbWAddrW +: UbWAddrW] = mxu_w_ub_addr;
  assign ub_wmask[160 +: 32]   = '0;
  assign ub_wdata[1280 +: 256] = '0;
  assign u_fault[1]             = 1'b0;               // the MXU and VPU never fault
  assign u_fault_code[4 +: 8]   = '0;
  assign u_fault_pc[32 +: 64]   = '0;
  assign u_fault_addr[32 +: 64] = '0;
  assign u_fault_info[32 +: 64] = '0;
  assign u_fault[2]             = 1'b0;

  // ---------------------------------------------------------------- VPU
  logic              vpu_ub_req, vpu_ub_gnt, vpu_ub_we, vpu_ub_wide, vpu_ub_rvalid;
  logic [$clog2(UbBytes)-1:0] vpu_ub_addr;
  logic [32*N-1:0]   vpu_ub_wdata, vpu_ub_rdata;
  logic [1:0]          vpu_buf_req, vpu_buf_we;
  logic [2*UbWAddrW-1:0] vpu_word_addr;
  logic [63:0]         vpu_buf_wmask;
  logic [511:0]        vpu_buf_wdata;

  tpu_vpu #(.N(N), .UbBytes(UbBytes), .AccRows(AccRows)) u_vpu (
    .clk_i               (clk_i),
    .rst_ni              (rst_ni),
    .clear_i             (start),
    .instr_valid_i       (u_valid[2]),
    .instr_ready_o       (u_ready[2]),
    .instr_i             (u_instr[256 +: 128]),
    .idle_o              (u_idle[2]),
    .ub_req_o            (vpu_ub_req),
    .ub_gnt_i            (vpu_ub_gnt),
    .ub_we_o             (vpu_ub_we),
    .ub_wide_o           (vpu_ub_wide),
    .ub_addr_o           (vpu_ub_addr),
    .ub_wdata_o          (vpu_ub_wdata),
    .ub_rvalid_i         (vpu_ub_rvalid),
    .ub_rdata_i          (vpu_ub_rdata),
    .acc_rd_valid_o      (acc_rd_valid),
    .acc_rd_ready_i      (acc_rd_ready),
    .acc_rd_addr_o       (acc_rd_addr),
    .acc_rd_data_valid_i (acc_rd_data_valid),
    .acc_rd_data_i       (acc_rd_data),
    .acc_wr_valid_o      (acc_wr_valid),
    .acc_wr_ready_i      (acc_wr_ready),
    .acc_wr_addr_o       (acc_wr_addr),
    .acc_wr_data_o       (acc_wr_data)
  );

  tpu_ub_port #(.N(N), .UbBytes(UbBytes)) u_vpu_ub (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .req_i       (vpu_ub_req),
    .gnt_o       (vpu_ub_gnt),
    .we_i        (vpu_ub_we),
    .wide_i      (vpu_ub_wide),
    .addr_i      (vpu_ub_addr),
    .wdata_i     (vpu_ub_wdata),
    .rvalid_o    (vpu_ub_rvalid),
    .rdata_o     (vpu_ub_rdata),
    .ub_req_o    (vpu_buf_req),
    .ub_gnt_i    ({ub_gnt[6], ub_gnt[3]}),
    .ub_we_o     (vpu_buf_we),
    .ub_addr_o   (vpu_word_addr),
    .ub_wmask_o  (vpu_buf_wmask),
    .ub_wdata_o  (vpu_buf_wdata),
    .ub_rvalid_i ({ub_rvalid[6], ub_rvalid[3]}),
    .ub_rdata_i  ({ub_rdata[6*256 +: 256], ub_rdata[768 +: 256]})
  );
  // the VPU's two buffer ports: 3 (even words of an access) and 6 (odd words)
  assign ub_req[3]                       = vpu_buf_req[0];
  assign ub_req[6]                       = vpu_buf_req[1];
  assign ub_we[3]                        = vpu_buf_we[0];
  assign ub_we[6]                        = vpu_buf_we[1];
  assign ub_addr[3*UbWAddrW +: UbWAddrW] = vpu_word_addr[0 +: UbWAddrW];
  assign ub_addr[6*UbWAddrW +: UbWAddrW] = vpu_word_addr[UbWAddrW +: UbWAddrW];
  assign ub_wmask[96 +: 32]              = vpu_buf_wmask[0 +: 32];
  assign ub_wmask[192 +: 32]             = vpu_buf_wmask[32 +: 32];
  assign ub_wdata[768 +: 256]            = vpu_buf_wdata[0 +: 256];
  assign ub_wdata[6*256 +: 256]          = vpu_buf_wdata[256 +: 256];

  // ---------------------------------------------------------------- ICI links
  // Transmit: link l carries the DMA's remote writes while its copy targets l, and the
  // sequencer's remote SIGNALs (which it sends only while the DMA is idle: no conflict). Both
  // enter the link's transmit queue (LinkTxFlits flits, in order), which the port drains at the
  // link's rate: a remote copy is finished for the DMA once its last flit is queued, so the
  // DMA goes on with local copies while the link still carries it (docs/multichip.md).
  logic [1:0]         tx_valid, tx_ready, rx_valid, rx_ready;
  logic [1:0]         txq_push, txq_full, txq_empty, port_ready;
  logic [2*FlitW-1:0] tx_flit, rx_flit, txq_head;
  // (readies depend only on the link chosen and the queue's state: no combinational loop)
  assign tx_ready      = ~txq_full;
  assign dma_ici_ready = tx_ready[dma_ici_link[1]];   // next (01) -> port 0, prev (10) -> 1
  assign rsig_ready    = tx_ready[rsig_link[1]];
  assign tx_idle       = txq_empty == 2'b11;
  // Per link on constant slices (a loop wrote computed slices of the two 320-bit flits).
  for (genvar l = 0; l < 2; l++) begin : g_tx
    logic dma_here, sig_here;
    assign dma_here   = dma_ici_valid && dma_ici_link == 2'(l + 1);
    assign sig_here   = rsig_valid && rsig_link == 2'(l + 1);
    assign tx_valid[l] = dma_here || sig_here;
    // (a flit only with valid: an idle link costs a simulator nothing here)
    assign tx_flit[FlitW*l +: FlitW] = dma_here ? dma_ici_flit :
                                       sig_here ? tpu_ici_pkg::signal_flit(rsig_sc) : '0;
  end
  assign txq_push = tx_valid & tx_ready;

  for (genvar l = 0; l < 2; l++) begin : g_txq
    logic [$clog2(LinkTxFlits):0] unused_count;
    tpu_dma_fifo #(.Width(FlitW), .Depth(LinkTxFlits)) u_txq (
      .clk_i   (clk_i),
      .rst_ni  (rst_ni),
      .push_i  (txq_push[l]),
      .data_i  (tx_flit[FlitW*l +: FlitW]),
      .full_o  (txq_full[l]),
      .pop_i   (!txq_empty[l] && port_ready[l]),
      .data_o  (txq_head[FlitW*l +: FlitW]),
      .empty_o (txq_empty[l]),
      .count_o (unused_count)
    );
  end

  for (genvar l = 0; l < 2; l++) begin : g_link
    logic [$clog2(LinkCredits + 1)-1:0] unused_credits;
    tpu_ici_port #(.FlitW(FlitW), .LinkBytes(LinkBytes), .Credits(LinkCredits)) u_port (
      .clk_i        (clk_i),
      .rst_ni       (rst_ni),
      .flit_valid_i (!txq_empty[l]),
      .flit_ready_o (port_ready[l]),
      .flit_i       (txq_head[FlitW*l +: FlitW]),
      .link_valid_o (ici_tx_valid_o[l]),
      .link_flit_o  (ici_tx_flit_o[FlitW*l +: FlitW]),
      .credit_i     (ici_credit_i[l]),
      .link_valid_i (ici_rx_valid_i[l]),
      .link_flit_i  (ici_rx_flit_i[FlitW*l +: FlitW]),
      .credit_o     (ici_credit_o[l]),
      .rx_valid_o   (rx_valid[l]),
      .rx_ready_i   (rx_ready[l]),
      .rx_flit_o    (rx_flit[FlitW*l +: FlitW]),
      .credits_o    (unused_credits)
    );
  end

  // Receive: into the UB (port 4), HBM (memory port 3) and the remote counters.
  logic rx_flit_applied;
  tpu_ici_rx #(.UbBytes(UbBytes)) u_ici_rx (
    .clk_i               (clk_i),
    .rst_ni              (rst_ni),
    .rx_valid_i          (rx_valid),
    .rx_ready_o          (rx_ready),
    .rx_flit_i           (rx_flit),
    .ub_req_o            (ub_req[4]),
    .ub_gnt_i            (ub_gnt[4]),
    .ub_addr_o           (ub_addr[4*UbWAddrW +: UbWAddrW]),
    .ub_wmask_o          (ub_wmask[128 +: 32]),
    .ub_wdata_o          (ub_wdata[1024 +: 256]),
    .hbm_req_valid_o     (m_req_valid[3]),
    .hbm_req_ready_i     (m_req_ready[3]),
    .hbm_req_addr_o      (m_req_addr[96 +: 32]),
    .hbm_req_id_o        (m_req_id[12 +: 4]),
    .hbm_wd_valid_o      (m_wd_valid[3]),
    .hbm_wd_ready_i      (m_wd_ready[3]),
    .hbm_wd_data_o       (m_wd_data[768 +: 256]),
    .hbm_wd_strb_o       (m_wd_strb[96 +: 32]),
    .hbm_wr_done_valid_i (m_wr_done_valid[3]),
    .hbm_wr_done_ready_o (m_wr_done_ready[3]),
    .rc_inc_o            (rc_inc),
    .rc_sc_o             (rc_sc),
    .flit_o              (rx_flit_applied)
  );
  assign ub_we[4]          = 1'b1;
  assign m_req_write[3]    = 1'b1;
  assign m_req_len[12 +: 4] = 4'd0;
  assign m_rd_ready[3]     = 1'b1;

  logic unused;
  assign unused = ^{hbm_busy, abort, m_rd_id[3:0], m_rd_last[1:0], m_rd_err[1],
                    m_wr_done_valid[0], m_wr_done_id[7:0], m_wr_done_err[1:0], ub_rvalid[1:0],
                    ub_rdata[256 +: 256], u_pc[32 +: 64], m_rd_valid[3], m_rd_id[12 +: 4],
                    m_rd_data[768 +: 256], m_rd_last[3], m_rd_err[3], m_wr_done_id[12 +: 4],
                    m_wr_done_err[3], ub_rvalid[4], ub_rdata[1024 +: 256], rx_flit_applied};
endmodule
