// tpu_hbm: the HBM2 memory system: Channels pseudo-channel controllers (tpu_hbm_ctrl), each with
// its own device pins, behind Ports AXI-like request ports joined by a crossbar. A port takes a
// request of 1..16 bursts (32 bytes each; a write's data follows on the port's wd channel, one
// beat per burst) and splits it into bursts, one per cycle; the address map sends each burst to
// its pseudo-channel: burst = addr >> 5, pseudo-channel = burst[PcLsb +: log2(Channels)], and the
// remaining bits (the PC field removed) form the controller's address (bank group = bits 1:0,
// column = 6:2, bank = 8:7, row = 22:9). With PcLsb = 0 consecutive bursts go to consecutive
// pseudo-channels, and each channel's share visits its four bank groups in turn. Each pseudo-channel's input is granted
// round-robin among the ports whose next burst goes there. Every read burst takes a slot of the
// port's reorder buffer (RobDepth) when it is sent, so the controllers may reorder freely
// (OrderById = 0: the slot is the tag) and the port still answers in request order; every write
// request takes an entry of the port's write tracker (WtDepth), completed when all its bursts'
// WRs have issued. Ordering: per port, read data and write completions each come back in
// request order (stronger than per id); a read accepted after a write to the same address
// (through any port) returns the written data. An address beyond Channels x 256 MiB is not sent
// to any controller: its read bursts return zeros with rd_err_o, its write with wr_done_err_o.
// Latency: 2 cycles more than the controller's (split register, reorder buffer): an idle
// row hit answers CL + 5 cycles after acceptance. Throughput: one burst per cycle per port, one
// per tCCD_S per pseudo-channel.
`include "tpu_assert.svh"

module tpu_hbm #(
  parameter int unsigned Channels   = 1,     // pseudo-channels: 1, 2, 4, 8 or 16
  parameter int unsigned Ports      = 1,     // request ports, 1..16
  parameter int unsigned PcLsb      = 0,     // address map: lowest burst-address bit of the PC
  parameter int unsigned RobDepth   = 64,    // per port: read bursts in flight (power of two)
  parameter int unsigned WtDepth    = 32,    // per port: write requests in flight (power of two)
  parameter int unsigned CL         = tpu_pkg::HBM_CL,  // timing: see tpu_hbm_ctrl
  parameter int unsigned CWL        = tpu_pkg::HBM_CWL,
  parameter int unsigned TRCD       = tpu_pkg::HBM_TRCD,
  parameter int unsigned TRP        = tpu_pkg::HBM_TRP,
  parameter int unsigned TRAS       = tpu_pkg::HBM_TRAS,
  parameter int unsigned TRC        = tpu_pkg::HBM_TRC,
  parameter int unsigned TWR        = tpu_pkg::HBM_TWR,
  parameter int unsigned TRTP       = tpu_pkg::HBM_TRTP,
  parameter int unsigned TCCD_S     = tpu_pkg::HBM_TCCD_S,
  parameter int unsigned TCCD_L     = tpu_pkg::HBM_TCCD_L,
  parameter int unsigned TRRD_S     = tpu_pkg::HBM_TRRD_S,
  parameter int unsigned TRRD_L     = tpu_pkg::HBM_TRRD_L,
  parameter int unsigned TFAW       = tpu_pkg::HBM_TFAW,
  parameter int unsigned TWTR_S     = tpu_pkg::HBM_TWTR_S,
  parameter int unsigned TWTR_L     = tpu_pkg::HBM_TWTR_L,
  parameter int unsigned TREFI      = tpu_pkg::HBM_TREFI,
  parameter int unsigned TRFC       = tpu_pkg::HBM_TRFC,
  parameter int unsigned TRFCSB     = tpu_pkg::HBM_TRFCSB,
  parameter int unsigned TRREFD     = tpu_pkg::HBM_TRREFD,
  parameter bit          RefPerBank = 1'b1,  // single-bank refresh (tpu_hbm_ctrl)
  parameter int unsigned QueueDepth = 32,    // per controller: read and write queue entries
  parameter int unsigned WriteHigh  = 24,
  parameter int unsigned WriteLow   = 8,
  parameter int unsigned ReadLow    = 4,
  parameter int unsigned RowHitCap  = 8,
  parameter int unsigned RespDepth  = 16
) (
  input  logic                   clk_i,
  input  logic                   rst_ni,
  // requests, per port p at [W*p +: W]
  input  logic [Ports-1:0]       req_valid_i,      // a request this cycle
  output logic [Ports-1:0]       req_ready_o,      // accepted this cycle if valid
  input  logic [Ports-1:0]       req_write_i,      // 1: write (data on wd), 0: read
  input  logic [Ports*32-1:0]    req_addr_i,       // byte address, 32-byte aligned (4:0 ignored)
  input  logic [Ports*4-1:0]     req_len_i,        // bursts - 1 (consecutive 32-byte bursts)
  input  logic [Ports*4-1:0]     req_id_i,         // returned with the responses
  // write data: one beat per burst of the accepted write requests, in request order
  input  logic [Ports-1:0]       wd_valid_i,
  output logic [Ports-1:0]       wd_ready_o,
  input  logic [Ports*256-1:0]   wd_data_i,        // byte k at bits 8k
  input  logic [Ports*32-1:0]    wd_strb_i,        // write byte k when bit k is set
  // read data: one beat per burst, in request order
  output logic [Ports-1:0]       rd_valid_o,
  input  logic [Ports-1:0]       rd_ready_i,
  output logic [Ports*4-1:0]     rd_id_o,
  output logic [Ports*256-1:0]   rd_data_o,
  output logic [Ports-1:0]       rd_last_o,        // the request's last burst
  output logic [Ports-1:0]       rd_err_o,         // address out of range (data is zero)
  // write completions: one per write request, in request order
  output logic [Ports-1:0]       wr_done_valid_o,
  input  logic [Ports-1:0]       wr_done_ready_i,
  output logic [Ports*4-1:0]     wr_done_id_o,
  output logic [Ports-1:0]       wr_done_err_o,    // some burst out of range (not written)
  // device pins, per pseudo-channel c at [W*c +: W] (see tpu_hbm_ctrl)
  output logic [Channels-1:0]    cmd_valid_o,
  output logic [Channels*3-1:0]  cmd_o,
  output logic [Channels*2-1:0]  bg_o,
  output logic [Channels*2-1:0]  bank_o,
  output logic [Channels*14-1:0] row_o,
  output logic [Channels*5-1:0]  col_o,
  output logic [Channels-1:0]    wdata_valid_o,
  output logic [Channels*128-1:0] wdata_o,
  output logic [Channels*16-1:0] wdata_strb_o,
  input  logic [Channels-1:0]    rdata_valid_i,
  input  logic [Channels*128-1:0] rdata_i,
  // status
  output logic                   busy_o            // anything accepted and not yet answered
);

  localparam int unsigned PcBits = $clog2(Channels);           // 0 for one pseudo-channel
  localparam int unsigned PcW    = (PcBits > 0) ? PcBits : 1;
  localparam int unsigned PortW  = (Ports > 1) ? $clog2(Ports) : 1;
  localparam int unsigned RobW   = $clog2(RobDepth);
  localparam int unsigned WtW    = $clog2(WtDepth);
  localparam int unsigned SlotW  = (RobW > WtW) ? RobW : WtW;
  localparam int unsigned TagW   = PortW + SlotW;               // controller id: {port, slot}
  localparam int unsigned RobMW  = 6;                           // slot metadata: id, last, err

  // ---------------------------------------------------------------- controllers' ports
  logic [Channels-1:0]        pc_req_valid, pc_req_ready, pc_req_write;
  logic [Channels*28-1:0]     pc_req_addr;
  logic [Channels*TagW-1:0]   pc_req_tag;
  logic [Channels*256-1:0]    pc_req_wdata;
  logic [Channels*32-1:0]     pc_req_wstrb;
  logic [Channels-1:0]        pc_rd_valid, pc_rd_ready, pc_wd_valid, pc_wd_ready;
  logic [Channels*TagW-1:0]   pc_rd_tag, pc_wd_tag;
  logic [Channels*256-1:0]    pc_rd_data;
  logic [Channels-1:0]        pc_busy;

  // ---------------------------------------------------------------- per-port state
  logic [Ports-1:0]           head_v_q, head_w_q;             // the request being split
  logic [Ports*27-1:0]        head_burst_q;                   // its next burst address
  logic [Ports*4-1:0]         head_rem_q;                     // bursts left - 1
  logic [Ports*4-1:0]         head_id_q;
  logic [Ports*WtW-1:0]       head_wslot_q;                   // its write-tracker entry
  logic [255:0]               rob_data_q [Ports][RobDepth];   // reorder buffer
  logic [RobMW-1:0]           rob_meta_q [Ports][RobDepth];   // {err, last, id}
  logic [Ports*RobDepth-1:0]  rob_vld_q;                      // slot holds its data
  logic [Ports*RobW-1:0]      rob_wp_q, rob_rp_q;
  logic [Ports*(RobW+1)-1:0]  rob_cnt_q;
  logic [3:0]                 wt_id_q  [Ports][WtDepth];      // write tracker
  logic [WtDepth*5-1:0]       wt_rem_q [Ports];               // bursts not yet complete
  logic [Ports*WtDepth-1:0]   wt_err_q;
  logic [Ports*WtW-1:0]       wt_wp_q, wt_rp_q;
  logic [Ports*(WtW+1)-1:0]   wt_cnt_q;
  logic [Channels*PortW-1:0]  req_rr_q;                       // per channel: port priority
  logic [Ports*PcW-1:0]       rsp_rr_q;                       // per port: channel priority

  // Where a burst address goes: its pseudo-channel, the controller's address, out of range.
  function automatic logic [PcW-1:0] pc_of(logic [26:0] burst);
    pc_of = (PcBits > 0) ? PcW'(burst >> PcLsb) : '0;
  endfunction
  function automatic logic [27:0] local_addr(logic [26:0] burst);
    logic [22:0] merged;  // in range: the bits above 22 are zero
    merged = 23'(((burst >> (PcLsb + PcBits)) << PcLsb) | (burst & ((27'd1 << PcLsb) - 27'd1)));
    local_addr = {merged, 5'd0};
  endfunction
  function automatic logic out_of_range(logic [26:0] burst);
    out_of_range = (burst >> (23 + PcBits)) != 27'd0;
  endfunction

  // ---------------------------------------------------------------- splitting and crossbar
  logic [Ports-1:0]          need, oor, emit;
  logic [Ports*PcW-1:0]      head_pc;
  logic [Channels*PortW-1:0] req_sel;                          // per channel: granted port
  logic [Channels-1:0]       req_any;

  always_comb begin
    for (int p = 0; p < Ports; p++) begin
      head_pc[PcW*p +: PcW] = pc_of(head_burst_q[27*p +: 27]);
      oor[p]  = out_of_range(head_burst_q[27*p +: 27]);
      need[p] = head_v_q[p] && (head_w_q[p] ? wd_valid_i[p]
                                            : rob_cnt_q[(RobW+1)*p +: RobW+1] < (RobW+1)'(RobDepth));
    end
    // per channel: the first requesting port from its round-robin pointer on
    for (int c = 0; c < Channels; c++) begin
      req_any[c]             = 1'b0;
      req_sel[PortW*c +: PortW] = '0;
      for (int k = Ports - 1; k >= 0; k--) begin
        logic [PortW:0] pk;
        pk = (PortW+1)'(req_rr_q[PortW*c +: PortW]) + (PortW+1)'(k);
        if (pk >= (PortW+1)'(Ports)) pk = pk - (PortW+1)'(Ports);
        if (need[pk[PortW-1:0]] && !oor[pk[PortW-1:0]] &&
            head_pc[PcW*pk[PortW-1:0] +: PcW] == PcW'(c)) begin
          req_any[c]                = 1'b1;
          req_sel[PortW*c +: PortW] = pk[PortW-1:0];
        end
      end
    end
    for (int c = 0; c < Channels; c++) begin
      logic [PortW-1:0] p;
      p = req_sel[PortW*c +: PortW];
      pc_req_valid[c]                = req_any[c];
      pc_req_write[c]                = head_w_q[p];
      pc_req_addr[28*c +: 28]        = local_addr(head_burst_q[27*p +: 27]);
      pc_req_tag[TagW*c +: TagW]     = {p, head_w_q[p] ? SlotW'(head_wslot_q[WtW*p +: WtW])
                                                       : SlotW'(rob_wp_q[RobW*p +: RobW])};
      pc_req_wstrb[32*c +: 32]       = wd_strb_i[32*p +: 32];
    end
  end
  // The write data only for a write request (no 256-bit word moved otherwise), per channel on
  // constant slices.
  for (genvar c = 0; c < Channels; c++) begin : g_pc_wdata
    logic [PortW-1:0] p;
    assign p = req_sel[PortW*c +: PortW];
    assign pc_req_wdata[256*c +: 256] = (req_any[c] && head_w_q[p]) ? wd_data_i[256*p +: 256] : '0;
  end

  // What each port sends this cycle (after the controllers' answers).
  always_comb begin
    for (int p = 0; p < Ports; p++) begin
      logic [PcW-1:0] c;
      c = head_pc[PcW*p +: PcW];
      emit[p] = need[p] && (oor[p] || (req_any[c] && req_sel[PortW*c +: PortW] == PortW'(p) &&
                                       pc_req_ready[c]));
      wd_ready_o[p] = emit[p] && head_w_q[p];
      req_ready_o[p] = (!head_v_q[p] || (emit[p] && head_rem_q[4*p +: 4] == '0)) &&
                       (!req_write_i[p] || wt_cnt_q[(WtW+1)*p +: WtW+1] < (WtW+1)'(WtDepth));
    end
  end

  // ---------------------------------------------------------------- responses back to ports
  logic [Ports*PcW-1:0] rsp_sel;                               // per port: granted channel
  logic [Ports-1:0]     rsp_any;
  // Write completions are all taken every cycle: a port's tracker counts them per entry, so a
  // burst of completions from every channel for one port never backs up into the controllers.
  assign pc_wd_ready = '1;

  always_comb begin
    for (int p = 0; p < Ports; p++) begin
      rsp_any[p] = 1'b0;
      rsp_sel[PcW*p +: PcW] = '0;
      for (int k = Channels - 1; k >= 0; k--) begin
        logic [PcW:0] ck;
        ck = (PcW+1)'(rsp_rr_q[PcW*p +: PcW]) + (PcW+1)'(k);
        if (ck >= (PcW+1)'(Channels)) ck = ck - (PcW+1)'(Channels);
        if (pc_rd_valid[ck[PcW-1:0]] &&
            PortW'(pc_rd_tag[TagW*ck[PcW-1:0] + SlotW +: PortW]) == PortW'(p)) begin
          rsp_any[p]            = 1'b1;
          rsp_sel[PcW*p +: PcW] = ck[PcW-1:0];
        end
      end
    end
    for (int c = 0; c < Channels; c++) begin
      logic [PortW-1:0] p;
      p = (Ports > 1) ? PortW'(pc_rd_tag[TagW*c + SlotW +: PortW]) : '0;
      pc_rd_ready[c] = rsp_any[p] && rsp_sel[PcW*p +: PcW] == PcW'(c);
    end
  end

  // ---------------------------------------------------------------- port outputs
  logic [Ports-1:0] rd_pop, wd_pop;
  // Per port on constant slices (a loop wrote computed slices: a wide insert of the read data
  // per port a cycle in the verilated model).
  for (genvar p = 0; p < Ports; p++) begin : g_port_out
    logic [RobW-1:0]  r;
    logic [WtW-1:0]   w;
    logic [RobMW-1:0] meta;
    assign r    = rob_rp_q[RobW*p +: RobW];
    assign w    = wt_rp_q[WtW*p +: WtW];
    assign meta = rob_meta_q[p][r];
    assign rd_valid_o[p]          = rob_vld_q[RobDepth*p + 32'(r)];
    // (the data only with valid: a simulator moves no 256-bit word for an idle port)
    assign rd_data_o[256*p +: 256] = rd_valid_o[p] ? rob_data_q[p][r] : '0;
    assign rd_id_o[4*p +: 4]      = meta[3:0];
    assign rd_last_o[p]           = meta[4];
    assign rd_err_o[p]            = meta[5];
    assign rd_pop[p]              = rd_valid_o[p] && rd_ready_i[p];
    assign wr_done_valid_o[p]     = wt_cnt_q[(WtW+1)*p +: WtW+1] != '0 &&
                                    wt_rem_q[p][5*w +: 5] == '0;
    assign wr_done_id_o[4*p +: 4] = wt_id_q[p][w];
    assign wr_done_err_o[p]       = wt_err_q[WtDepth*p + 32'(w)];
    assign wd_pop[p]              = wr_done_valid_o[p] && wr_done_ready_i[p];
  end

  // Write-tracker events this cycle: per port, a write request accepted (an entry allocated)
  // and an out-of-range burst of the head's write (completed at once); per channel, a WR issued
  // for one of a port's entries.
  logic [Ports-1:0]          wt_alloc;                         // a write request accepted
  logic [Ports-1:0]          wt_oor;                           // the head's burst, out of range
  logic [Channels*Ports-1:0] wd_hit;                           // [Ports*k + p]: channel k, port p
  always_comb begin
    for (int p = 0; p < Ports; p++) begin
      wt_alloc[p] = req_valid_i[p] && req_ready_o[p] && req_write_i[p];
      wt_oor[p]   = emit[p] && head_w_q[p] && oor[p];
    end
    for (int k = 0; k < Channels; k++) begin
      for (int p = 0; p < Ports; p++) begin
        wd_hit[Ports*k + p] = pc_wd_valid[k] &&
                              PortW'(pc_wd_tag[TagW*k + SlotW +: PortW]) == PortW'(p);
      end
    end
  end

  // ---------------------------------------------------------------- state update
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      head_v_q     <= '0;
      head_w_q     <= '0;
      head_burst_q <= '0;
      head_rem_q   <= '0;
      head_id_q    <= '0;
      head_wslot_q <= '0;
      rob_vld_q    <= '0;
      rob_wp_q     <= '0;
      rob_rp_q     <= '0;
      rob_cnt_q    <= '0;
      wt_wp_q      <= '0;
      wt_rp_q      <= '0;
      wt_cnt_q     <= '0;
      wt_err_q     <= '0;
      req_rr_q     <= '0;
      rsp_rr_q     <= '0;
    end else begin
      for (int c = 0; c < Channels; c++) begin
        if (pc_req_valid[c] && pc_req_ready[c]) begin
          req_rr_q[PortW*c +: PortW] <= (req_sel[PortW*c +: PortW] == PortW'(Ports - 1)) ? '0 :
                                        req_sel[PortW*c +: PortW] + PortW'(1);
        end
      end
      for (int p = 0; p < Ports; p++) begin
        logic [RobW-1:0]     r;
        logic [WtW-1:0]      w;
        logic [PcW-1:0]      c;
        logic [RobDepth-1:0] vld;
        // the head: advance on each sent burst; load the next request when it is done
        if (emit[p]) begin
          head_burst_q[27*p +: 27] <= head_burst_q[27*p +: 27] + 27'd1;
          head_rem_q[4*p +: 4]     <= head_rem_q[4*p +: 4] - 4'd1;
          if (head_rem_q[4*p +: 4] == '0) head_v_q[p] <= 1'b0;
        end
        if (req_valid_i[p] && req_ready_o[p]) begin
          head_v_q[p]              <= 1'b1;
          head_w_q[p]              <= req_write_i[p];
          head_burst_q[27*p +: 27] <= req_addr_i[32*p + 5 +: 27];
          head_rem_q[4*p +: 4]     <= req_len_i[4*p +: 4];
          head_id_q[4*p +: 4]      <= req_id_i[4*p +: 4];
          head_wslot_q[WtW*p +: WtW] <= wt_wp_q[WtW*p +: WtW];
        end
        // reorder buffer: a slot per read burst sent, filled by its channel, freed in order
        r = rob_wp_q[RobW*p +: RobW];
        c = rsp_sel[PcW*p +: PcW];
        if (emit[p] && !head_w_q[p]) rob_wp_q[RobW*p +: RobW] <= r + RobW'(1);
        if (rd_pop[p]) rob_rp_q[RobW*p +: RobW] <= rob_rp_q[RobW*p +: RobW] + RobW'(1);
        // slot valid bits: set when filled (zeros for out of range), cleared when popped. Written
        // only in a cycle that fills, sends or pops (an enable: a quiet port's reorder state is
        // not evaluated, where the 64-bit slice insert ran every cycle for every port).
        if ((emit[p] && !head_w_q[p]) || rsp_any[p] || rd_pop[p]) begin
          vld = rob_vld_q[RobDepth*p +: RobDepth];
          if (emit[p] && !head_w_q[p] && oor[p]) vld[r] = 1'b1;
          if (rsp_any[p]) vld[RobW'(pc_rd_tag[TagW*c +: SlotW])] = 1'b1;
          if (rd_pop[p]) vld[rob_rp_q[RobW*p +: RobW]] = 1'b0;
          rob_vld_q[RobDepth*p +: RobDepth] <= vld;
          rob_cnt_q[(RobW+1)*p +: RobW+1] <= rob_cnt_q[(RobW+1)*p +: RobW+1] +
              (RobW+1)'(emit[p] && !head_w_q[p]) - (RobW+1)'(rd_pop[p]);
        end
        // write tracker: an entry per write request, done when every burst's WR has issued
        w = wt_wp_q[WtW*p +: WtW];
        if (wt_alloc[p]) begin
          wt_wp_q[WtW*p +: WtW]          <= w + WtW'(1);
          wt_err_q[WtDepth*p + 32'(w)]        <= 1'b0;
        end
        if (wt_oor[p]) wt_err_q[WtDepth*p + 32'(head_wslot_q[WtW*p +: WtW])] <= 1'b1;
        if (wd_pop[p]) wt_rp_q[WtW*p +: WtW] <= wt_rp_q[WtW*p +: WtW] + WtW'(1);
        if (wt_alloc[p] || wd_pop[p])
          wt_cnt_q[(WtW+1)*p +: WtW+1] <= wt_cnt_q[(WtW+1)*p +: WtW+1] +
              (WtW+1)'(wt_alloc[p]) - (WtW+1)'(wd_pop[p]);
        if (rsp_any[p]) begin
          rsp_rr_q[PcW*p +: PcW] <= (rsp_sel[PcW*p +: PcW] == PcW'(Channels - 1)) ? '0 :
                                    rsp_sel[PcW*p +: PcW] + PcW'(1);
        end
      end
    end
  end

  // Reorder-buffer data and metadata, write-tracker ids and remaining-burst counts: register
  // files written at a decoded slot, one process per port (not reset: read only where valid;
  // a count is written when its entry is allocated).
  for (genvar p = 0; p < Ports; p++) begin : g_port_mem
    always_ff @(posedge clk_i) begin
      logic [RobW-1:0]      r, t;
      logic [PcW-1:0]       c;
      logic [WtDepth*5-1:0] rem;
      r = rob_wp_q[RobW*p +: RobW];
      c = rsp_sel[PcW*p +: PcW];
      t = RobW'(pc_rd_tag[TagW*c +: SlotW]);
      if (emit[p] && !head_w_q[p]) begin
        rob_meta_q[p][r] <= {oor[p], head_rem_q[4*p +: 4] == '0, head_id_q[4*p +: 4]};
        if (oor[p]) rob_data_q[p][r] <= '0;
      end
      if (rsp_any[p]) rob_data_q[p][t] <= pc_rd_data[256*c +: 256];
      if (wt_alloc[p]) wt_id_q[p][wt_wp_q[WtW*p +: WtW]] <= req_id_i[4*p +: 4];
      // write tracker: a new entry's burst count, then one less for each burst completed
      // (several channels may complete bursts of one entry in the same cycle: one each)
      rem = wt_rem_q[p];
      if (wt_alloc[p]) rem[5*wt_wp_q[WtW*p +: WtW] +: 5] = 5'(req_len_i[4*p +: 4]) + 5'd1;
      if (wt_oor[p]) begin
        rem[5*head_wslot_q[WtW*p +: WtW] +: 5] = rem[5*head_wslot_q[WtW*p +: WtW] +: 5] - 5'd1;
      end
      for (int k = 0; k < Channels; k++) begin
        if (wd_hit[Ports*k + p]) begin
          rem[5*WtW'(pc_wd_tag[TagW*k +: SlotW]) +: 5] =
              rem[5*WtW'(pc_wd_tag[TagW*k +: SlotW]) +: 5] - 5'd1;
        end
      end
      wt_rem_q[p] <= rem;
    end
  end

  // ---------------------------------------------------------------- the controllers
  for (genvar c = 0; c < Channels; c++) begin : g_pc
    tpu_hbm_ctrl #(
      .CL(CL), .CWL(CWL), .TRCD(TRCD), .TRP(TRP), .TRAS(TRAS), .TRC(TRC), .TWR(TWR),
      .TRTP(TRTP), .TCCD_S(TCCD_S), .TCCD_L(TCCD_L), .TRRD_S(TRRD_S), .TRRD_L(TRRD_L),
      .TFAW(TFAW), .TWTR_S(TWTR_S), .TWTR_L(TWTR_L), .TREFI(TREFI), .TRFC(TRFC),
      .TRFCSB(TRFCSB), .TRREFD(TRREFD), .RefPerBank(RefPerBank),
      .QueueDepth(QueueDepth), .WriteHigh(WriteHigh), .WriteLow(WriteLow),
      .ReadLow(ReadLow), .RowHitCap(RowHitCap), .RespDepth(RespDepth), .IdW(TagW), .OrderById(1'b0)
    ) u_ctrl (
      .clk_i           (clk_i),
      .rst_ni          (rst_ni),
      .req_valid_i     (pc_req_valid[c]),
      .req_ready_o     (pc_req_ready[c]),
      .req_write_i     (pc_req_write[c]),
      .req_addr_i      (pc_req_addr[28*c +: 28]),
      .req_id_i        (pc_req_tag[TagW*c +: TagW]),
      .req_wdata_i     (pc_req_wdata[256*c +: 256]),
      .req_wstrb_i     (pc_req_wstrb[32*c +: 32]),
      .rd_valid_o      (pc_rd_valid[c]),
      .rd_ready_i      (pc_rd_ready[c]),
      .rd_id_o         (pc_rd_tag[TagW*c +: TagW]),
      .rd_data_o       (pc_rd_data[256*c +: 256]),
      .wr_done_valid_o (pc_wd_valid[c]),
      .wr_done_ready_i (pc_wd_ready[c]),
      .wr_done_id_o    (pc_wd_tag[TagW*c +: TagW]),
      .cmd_valid_o     (cmd_valid_o[c]),
      .cmd_o           (cmd_o[3*c +: 3]),
      .bg_o            (bg_o[2*c +: 2]),
      .bank_o          (bank_o[2*c +: 2]),
      .row_o           (row_o[14*c +: 14]),
      .col_o           (col_o[5*c +: 5]),
      .wdata_valid_o   (wdata_valid_o[c]),
      .wdata_o         (wdata_o[128*c +: 128]),
      .wdata_strb_o    (wdata_strb_o[16*c +: 16]),
      .rdata_valid_i   (rdata_valid_i[c]),
      .rdata_i         (rdata_i[128*c +: 128]),
      .busy_o          (pc_busy[c])
    );
  end

  assign busy_o = pc_busy != '0 || head_v_q != '0 || rob_cnt_q != '0 || wt_cnt_q != '0;

  logic unused_addr_lsbs;
  assign unused_addr_lsbs = ^req_addr_i;

  // ---------------------------------------------------------------- invariants
  for (genvar p = 0; p < Ports; p++) begin : g_assert
    `TPU_ASSERT(RobNeverOverflows, rob_cnt_q[(RobW+1)*p +: RobW+1] <= (RobW+1)'(RobDepth))
    `TPU_ASSERT(WriteTrackerNeverOverflows, wt_cnt_q[(WtW+1)*p +: WtW+1] <= (WtW+1)'(WtDepth))
  end
endmodule
