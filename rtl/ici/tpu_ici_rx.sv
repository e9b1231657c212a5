// tpu_ici_rx: the receive side of a chip's ICI links (docs/isa.md, "Multi-chip"). It takes the
// flits the two link ports (next, prev) have received, one flit at a time, alternating between
// the links when both have one, and applies each in its link's order: a remote write of a
// 32-byte word goes to the unified buffer (a write port of its own) or to HBM (a port of the
// memory system: one single-burst write request with strobes); a remote signal increments
// remote counter RCsc in the sequencer once every earlier HBM write has completed — so a
// program that waits on RCsc sees every word its neighbour wrote before the SIGNAL.
// Only flits of one link are ordered: a signal follows the writes of its own link, not those
// queued on the other (docs/isa.md: a program signals over the link its data went over).
// Throughput: one UB word a cycle as the buffer grants it; an HBM word every second cycle (the
// memory system takes the data beat the cycle after the request) — above the two links'
// 2 x 1/3 flit a cycle either way. A signal holds the receive side until the HBM writes before
// it have completed.
module tpu_ici_rx #(
  parameter int unsigned UbBytes   = 262144,
  parameter int unsigned MaxWrites = 32,               // HBM writes awaiting completion
  localparam int unsigned FlitW    = tpu_ici_pkg::FlitW,
  localparam int unsigned UbWAddrW = $clog2(UbBytes / 32),
  localparam int unsigned OutW     = $clog2(MaxWrites) + 1
) (
  input  logic                 clk_i,
  input  logic                 rst_ni,
  // the link ports' receive sides: 0 next, 1 prev
  input  logic [1:0]           rx_valid_i,
  output logic [1:0]           rx_ready_o,
  input  logic [2*FlitW-1:0]   rx_flit_i,
  // unified buffer write port
  output logic                 ub_req_o,
  input  logic                 ub_gnt_i,
  output logic [UbWAddrW-1:0]  ub_addr_o,
  output logic [31:0]          ub_wmask_o,
  output logic [255:0]         ub_wdata_o,
  // HBM port (tpu_hbm's protocol; writes only)
  output logic                 hbm_req_valid_o,
  input  logic                 hbm_req_ready_i,
  output logic [31:0]          hbm_req_addr_o,
  output logic [3:0]           hbm_req_id_o,
  output logic                 hbm_wd_valid_o,
  input  logic                 hbm_wd_ready_i,
  output logic [255:0]         hbm_wd_data_o,
  output logic [31:0]          hbm_wd_strb_o,
  input  logic                 hbm_wr_done_valid_i,
  output logic                 hbm_wr_done_ready_o,
  // remote counters (tpu_seq)
  output logic                 rc_inc_o,               // one cycle: RC[rc_sc_o] += 1
  output logic [3:0]           rc_sc_o,
  // activity
  output logic                 flit_o                  // a flit was applied this cycle
);
  logic            lock_q, lock_port_q, rr_q;          // rr_q: the link served first
  logic            req_sent_q, wd_sent_q;              // the head's HBM request / data taken
  logic [OutW-1:0] hbm_out_q;                          // HBM writes without a completion
  logic [3:0]      id_q;

  logic             cur;                               // the link being served
  logic [FlitW-1:0] f;
  logic [1:0]       kind;
  assign cur  = lock_q ? lock_port_q : (rx_valid_i[rr_q] ? rr_q : !rr_q);
  assign f    = rx_flit_i[FlitW*cur +: FlitW];
  assign kind = f[tpu_ici_pkg::KindLsb +: 2];

  logic have, is_ub, is_hbm, is_sig, req_fire, wd_fire, done;
  assign have   = rx_valid_i[cur];
  assign is_ub  = have && kind == tpu_ici_pkg::FLIT_WRITE_UB;
  assign is_hbm = have && kind == tpu_ici_pkg::FLIT_WRITE_HBM;
  assign is_sig = have && kind == tpu_ici_pkg::FLIT_SIGNAL;

  assign ub_req_o   = is_ub;
  assign ub_addr_o  = f[tpu_ici_pkg::WordLsb +: UbWAddrW];
  assign ub_wmask_o = f[287:256];
  assign ub_wdata_o = f[255:0];

  assign hbm_req_valid_o = is_hbm && !req_sent_q && hbm_out_q < OutW'(MaxWrites);
  assign hbm_req_addr_o  = {f[tpu_ici_pkg::WordLsb +: 27], 5'd0};
  assign hbm_req_id_o    = id_q;
  assign hbm_wd_valid_o  = is_hbm && !wd_sent_q && (req_sent_q || hbm_req_valid_o);
  assign hbm_wd_data_o   = f[255:0];
  assign hbm_wd_strb_o   = f[287:256];
  assign hbm_wr_done_ready_o = 1'b1;
  assign req_fire = hbm_req_valid_o && hbm_req_ready_i;
  assign wd_fire  = hbm_wd_valid_o && hbm_wd_ready_i;

  assign rc_sc_o  = f[tpu_ici_pkg::WordLsb +: 4];      // the counter, in the word field
  assign rc_inc_o = is_sig && hbm_out_q == '0;
  assign done     = (is_ub && ub_gnt_i) || rc_inc_o ||
                    (is_hbm && (req_sent_q || req_fire) && (wd_sent_q || wd_fire));
  assign flit_o   = done;
  always_comb begin
    rx_ready_o      = '0;
    rx_ready_o[cur] = done;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      lock_q      <= 1'b0;
      lock_port_q <= 1'b0;
      rr_q        <= 1'b0;
      req_sent_q  <= 1'b0;
      wd_sent_q   <= 1'b0;
      hbm_out_q   <= '0;
      id_q        <= '0;
    end else begin
      hbm_out_q <= hbm_out_q + OutW'(req_fire) - OutW'(hbm_wr_done_valid_i);
      if (req_fire) id_q <= id_q + 4'd1;
      if (done) begin
        lock_q     <= 1'b0;
        rr_q       <= !cur;
        req_sent_q <= 1'b0;
        wd_sent_q  <= 1'b0;
      end else if (have) begin
        lock_q      <= 1'b1;                           // finish this flit first
        lock_port_q <= cur;
        if (req_fire) req_sent_q <= 1'b1;
        if (wd_fire)  wd_sent_q  <= 1'b1;
      end
    end
  end

  logic unused;
  assign unused = ^{f[290:288]};
endmodule
