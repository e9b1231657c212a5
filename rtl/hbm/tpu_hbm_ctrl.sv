// tpu_hbm_ctrl: one HBM2 pseudo-channel controller. Requests (one 32-byte burst each, byte address
// 32-byte aligned) enter a read queue and a write queue (QueueDepth each); an FR-FCFS scheduler
// with an open-page policy issues at most one command per cycle (ACT, RD, WR, PRE, REF) to the
// device pins, keeping per-bank, per-bank-group and per-channel "cycles until legal" counters for
// every rule of the HBM2 timing checker (docs/memory.md) plus the data bus (read beats at RD + CL,
// RD + CL + 1 never overlap write beats at WR + CWL, WR + CWL + 1; a WR is never placed before the
// data of an earlier RD). Writes carry byte strobes (HBM2 data mask). Address map: burst = addr >>
// 5; bank group = burst[1:0], column = burst[6:2], bank = burst[8:7], row = burst[22:9]
// (ColLow = 1; ColLow = 0: bank = burst[3:2], column = burst[8:4]), so consecutive bursts go to
// different bank groups and a sequential stream can run at one burst per tCCD_S (peak 16 bytes
// per cycle); with ColLow a stream finishes the rows of four banks before it opens the next
// four, so those ACTs happen early, in banks not in use, and row changes cost no bandwidth.
// Queue entries hold {row, column, bank, bank group} whatever the map. Scheduling: in the current
// mode's queue, the oldest row hit whose column command is legal now (unless RowHitCap hits in a
// row were served to that bank while the oldest request misses there), else the oldest ACT (closed
// bank) or PRE (conflict; only for the oldest request or a bank with no pending hits) that is legal
// now. A fresh row (opened, no RD/WR yet; its request is still queued) is not precharged, which
// would waste its ACT, but in two cases: if the oldest request misses in a bank whose fresh row no
// request of this mode hits, the mode gives way to the other, and in the mode so begun, with no hit
// of its own able to issue, its oldest request may close such a row (per-id ordering can make both
// modes wait on each other); an all-bank REF's window (below) closes any row. A mode ends only once
// each fresh row that a request of its own may use has had its RD/WR; until then only its oldest
// request gets row commands. Writes drain when the write queue reaches WriteHigh, when there are no
// reads, when at most ReadLow reads but more than WriteLow writes are queued (few reads: little
// bank parallelism, and writes to issue), or when a request waits on a write hazard; reads resume
// at WriteLow (once a drain has issued a WR and every write the previous drain left behind, with
// reads waiting and no request waiting on a write) or when writes run out; writes that waited
// WriteMaxAge cycles in read mode force a drain, so neither kind starves, and such a drain issues
// MinDrain WRs (or all there are) before reads resume, unless it gives way: its bus turnarounds are
// paid for many writes, not for one or two. Row preparation: in a cycle with no command of the
// current mode, the oldest of the other queue's first PrepDepth entries whose bank the current
// mode's queue does not use gets its ACT (closed bank; a write's only with WriteHigh - WriteLow
// writes queued, a drain near) or PRE (another row open, not fresh), so a mode switch does not
// start with tRP + tRCD of silence. Hazards are resolved at the front end: a request is not
// accepted (req_ready_o low) while a queued write has its address, nor a write while a queued read
// has its address, so every read returns the data of the last write accepted before it. Ordering:
// responses of one id come back in request order (reads and writes each; the scheduler never issues
// a request ahead of an older queued one of the same id); different ids may reorder. With OrderById
// = 0 ids are unique tags (tpu_hbm restores order in its reorder buffer) and the scheduler reorders
// freely. wr_done is returned when the WR is issued (its data is then ordered before any later RD).
// An RD is issued only when the response FIFO (RespDepth) has room for its data, so rd_ready_i low
// stalls reads and never loses data. Refresh (RefPerBank = 1): single-bank refreshes (REFSB), 16
// owed every TREFI, each bank once a set of 16: one bank at a time is chosen — not yet refreshed in
// this set, without a fresh row, in a group of four banks (one bank address, the four bank groups:
// a stream uses all four at once) with no request queued (reads or writes), of the group most
// recently given a RD/WR (to 32 cycles: a stream just left it) — then precharged and given its
// REFSB; it is busy tRFCSB while the other banks serve. The next choice waits RefSpacing cycles
// after a REFSB. With RefUrgent or more owed the choice ignores queued requests. The chosen bank
// takes no ACT or RD/WR until its REFSB. RefPerBank = 0: an all-bank REF every TREFI cycles, never
// skipped: when due, no new ACT; for 2 * 16 cycles each open bank may take one more RD/WR (column
// commands first), and a bank is precharged when legal once it has had it, has no queued hit and no
// fresh row, or that window has passed; REF issued, then tRFC blocks ACTs (so a stream keeps the
// bus busy while the banks close). Latency: a row hit on an idle channel returns its data CL + 3
// cycles after acceptance (queue, RD, CL, two beats, response FIFO); a miss adds tRCD (closed) or
// tRP + tRCD (conflict). Throughput: one request accepted per cycle; streaming reads reach one
// burst per tCCD_S apart from refresh and row changes. CWL must be at least 1.
`include "tpu_assert.svh"

module tpu_hbm_ctrl #(
  parameter int unsigned CL         = tpu_pkg::HBM_CL,  // RD to first read beat, cycles
  parameter int unsigned CWL        = tpu_pkg::HBM_CWL,  // WR to first write beat (>= 1)
  parameter int unsigned TRCD       = tpu_pkg::HBM_TRCD,
  parameter int unsigned TRP        = tpu_pkg::HBM_TRP,
  parameter int unsigned TRAS       = tpu_pkg::HBM_TRAS,
  parameter int unsigned TRC        = tpu_pkg::HBM_TRC,
  parameter int unsigned TWR        = tpu_pkg::HBM_TWR,  // from the end of write data
  parameter int unsigned TRTP       = tpu_pkg::HBM_TRTP,
  parameter int unsigned TCCD_S     = tpu_pkg::HBM_TCCD_S,
  parameter int unsigned TCCD_L     = tpu_pkg::HBM_TCCD_L,
  parameter int unsigned TRRD_S     = tpu_pkg::HBM_TRRD_S,
  parameter int unsigned TRRD_L     = tpu_pkg::HBM_TRRD_L,
  parameter int unsigned TFAW       = tpu_pkg::HBM_TFAW,
  parameter int unsigned TWTR_S     = tpu_pkg::HBM_TWTR_S,  // from the end of write data
  parameter int unsigned TWTR_L     = tpu_pkg::HBM_TWTR_L,
  parameter int unsigned TREFI      = tpu_pkg::HBM_TREFI,  // < 65536
  parameter int unsigned TRFC       = tpu_pkg::HBM_TRFC,
  parameter int unsigned TRFCSB     = tpu_pkg::HBM_TRFCSB,  // REFSB to ACT, same bank
  parameter int unsigned TRREFD     = tpu_pkg::HBM_TRREFD,  // REFSB to REFSB or ACT, any bank
  parameter bit          RefPerBank = 1'b1,  // 1: REFSBs (16 a TREFI); 0: an all-bank REF a TREFI
  parameter int unsigned RefSpacing = 8,     // cycles from a REFSB to the next (not behind)
  parameter int unsigned RefUrgent  = 32,    // REFSBs owed from which queued requests wait
  parameter int unsigned Burst      = tpu_pkg::HBM_BURST_CYCLES,  // bus cycles of a 32-byte burst
  parameter int unsigned QueueDepth = 32,    // read queue and write queue, entries each
  parameter int unsigned WriteHigh  = 24,    // start draining writes at this many
  parameter int unsigned WriteLow   = 8,     // stop draining (if reads wait) at this many
  parameter int unsigned ReadLow    = 4,     // reads this few: drain writes (more than WriteLow)
  parameter int unsigned PrepDepth  = 4,     // other-queue entries considered for row preparation
  parameter int unsigned MinDrain   = 16,    // WRs before reads resume in a drain forced by age (1..255)
  parameter int unsigned RowHitCap  = 8,     // consecutive hits to a bank while the oldest misses
  parameter int unsigned WriteMaxAge = 512,  // cycles writes may wait in read mode (< 65536)
  parameter int unsigned RespDepth  = 16,    // read response FIFO, bursts
  parameter int unsigned IdW        = 4,     // request id bits
  parameter bit          OrderById  = 1'b1,  // 0: ids are unique tags, no per-id ordering
  parameter bit          ColLow     = 1'b1   // address map: column below bank (see above)
) (
  input  logic         clk_i,
  input  logic         rst_ni,
  // requests
  input  logic         req_valid_i,       // a request this cycle
  output logic         req_ready_o,       // accepted this cycle if valid
  input  logic         req_write_i,       // 1: write req_wdata_i, 0: read
  input  logic [27:0]  req_addr_i,        // byte address, 32-byte aligned (bits 4:0 ignored)
  input  logic [IdW-1:0] req_id_i,        // requester id (ordering domain)
  input  logic [255:0] req_wdata_i,       // write burst, byte k at bits 8k
  input  logic [31:0]  req_wstrb_i,       // write byte k when bit k is set
  // read responses
  output logic         rd_valid_o,        // rd_id_o / rd_data_o hold a response
  input  logic         rd_ready_i,        // response taken this cycle if valid
  output logic [IdW-1:0] rd_id_o,
  output logic [255:0] rd_data_o,         // byte k at bits 8k
  // write completions
  output logic         wr_done_valid_o,   // wr_done_id_o holds a completion
  input  logic         wr_done_ready_i,   // completion taken this cycle if valid
  output logic [IdW-1:0] wr_done_id_o,
  // device pins (one command per cycle)
  output logic         cmd_valid_o,       // a command this cycle
  output logic [2:0]   cmd_o,             // 0 ACT, 1 RD, 2 WR, 3 PRE, 4 REF, 5 REFSB
  output logic [1:0]   bg_o,              // bank group (not REF; REFSB: the bank refreshed)
  output logic [1:0]   bank_o,            // bank in the group (not REF)
  output logic [13:0]  row_o,             // ACT
  output logic [4:0]   col_o,             // RD, WR
  output logic         wdata_valid_o,     // a write beat: WR + CWL, WR + CWL + 1
  output logic [127:0] wdata_o,           // beat 0 = burst bytes 0..15
  output logic [15:0]  wdata_strb_o,      // byte k of the beat written (HBM DM = ~strb)
  input  logic         rdata_valid_i,     // a read beat: RD + CL, RD + CL + 1
  input  logic [127:0] rdata_i,
  // status
  output logic         busy_o             // requests queued or in flight, or responses held
);

  localparam int unsigned EW      = IdW + 23;            // queue entry: {id, burst[22:0]}
  localparam int unsigned WW      = 256 + 32;            // write queue data: {strb, data}
  localparam int unsigned NB      = 16;                  // banks
  localparam int unsigned TW      = 16;                  // timing counter width
  localparam int unsigned QW      = $clog2(QueueDepth + 1);
  localparam int unsigned QIW     = $clog2(QueueDepth);
  localparam int unsigned RW      = $clog2(RespDepth + 1);
  localparam int unsigned RIW     = $clog2(RespDepth);
  localparam int unsigned HW      = $clog2(RowHitCap + 1);
  localparam int unsigned WdDepth = 8;                   // write completions held
  localparam int unsigned WfDepth = 4;                   // write bursts between WR and data
  localparam int unsigned RefGrace = 2 * NB;             // cycles of last RD/WRs when REF due

  localparam logic [2:0] CmdAct = 3'd0;
  localparam logic [2:0] CmdRd  = 3'd1;
  localparam logic [2:0] CmdWr  = 3'd2;
  localparam logic [2:0] CmdPre = 3'd3;
  localparam logic [2:0] CmdRef = 3'd4;
  localparam logic [2:0] CmdRefSb = 3'd5;

  // Minimum spacings (cycles from one command to the next legal one).
  localparam int unsigned CcdS   = (TCCD_S > Burst) ? TCCD_S : Burst;
  localparam int unsigned CcdL   = (TCCD_L > Burst) ? TCCD_L : Burst;
  localparam int unsigned RdToWr = (CL + Burst > CWL) ? CL + Burst - CWL : 0;  // data bus
  localparam logic [TW-1:0] GapRcd  = TW'(TRCD);
  localparam logic [TW-1:0] GapRp   = TW'(TRP);
  localparam logic [TW-1:0] GapRas  = TW'(TRAS);
  localparam logic [TW-1:0] GapRc   = TW'(TRC);
  localparam logic [TW-1:0] GapWr   = TW'(CWL + Burst + TWR);
  localparam logic [TW-1:0] GapRtp  = TW'(TRTP);
  localparam logic [TW-1:0] GapCcdS = TW'(CcdS);
  localparam logic [TW-1:0] GapCcdL = TW'(CcdL);
  localparam logic [TW-1:0] GapRrdS = TW'(TRRD_S);
  localparam logic [TW-1:0] GapRrdL = TW'(TRRD_L);
  localparam logic [TW-1:0] GapFaw  = TW'(TFAW);
  localparam logic [TW-1:0] GapWtrS = TW'(CWL + Burst + TWTR_S);
  localparam logic [TW-1:0] GapWtrL = TW'(CWL + Burst + TWTR_L);
  localparam logic [TW-1:0] GapRdWr = TW'(RdToWr);
  localparam logic [TW-1:0] GapRfc  = TW'(TRFC);
  localparam logic [TW-1:0] GapRfcsb = TW'(TRFCSB);
  localparam logic [TW-1:0] GapRrefd = TW'(TRREFD);
  localparam logic [TW-1:0] GapSbNext = TW'(RefSpacing);

  // A counter after this cycle: one less, but at least gap - 1 when a command sets it now.
  function automatic logic [TW-1:0] bump(logic [TW-1:0] cur, logic [TW-1:0] gap);
    logic [TW-1:0] dec, g;
    dec = (cur == '0) ? '0 : cur - TW'(1);
    g   = (gap == '0) ? '0 : gap - TW'(1);
    bump = (g > dec) ? g : dec;
  endfunction

  // The index of the lowest set bit of a non-zero mask (a priority encoder, by binary search:
  // five compare-and-shift steps, so the simulator runs straight-line code instead of a loop
  // over the entries); 0 for a zero mask.
  function automatic logic [QIW-1:0] lowest_set(input logic [QueueDepth-1:0] m);
    logic [31:0] x;
    logic [4:0]  n;
    x = 32'(m);
    n = 5'd0;
    if (x[15:0] == 16'd0) begin n = n + 5'd16; x = x >> 16; end
    if (x[7:0] == 8'd0)   begin n = n + 5'd8;  x = x >> 8;  end
    if (x[3:0] == 4'd0)   begin n = n + 5'd4;  x = x >> 4;  end
    if (x[1:0] == 2'd0)   begin n = n + 5'd2;  x = x >> 2;  end
    if (x[0] == 1'b0)     begin n = n + 5'd1;  end
    lowest_set = (m == '0) ? '0 : QIW'(n);
  endfunction
  if (QueueDepth > 32) begin : g_queue_too_deep
    $error("tpu_hbm_ctrl: QueueDepth %0d > 32 (lowest_set searches 32 entries)", QueueDepth);
  end
  // wdrain_q saturates at 255, so a forced drain of more WRs would never end
  if (MinDrain < 1 || MinDrain > 255) begin : g_bad_min_drain
    $error("tpu_hbm_ctrl: MinDrain %0d out of range (1..255)", MinDrain);
  end
  if (PrepDepth > QueueDepth) begin : g_bad_prep_depth
    $error("tpu_hbm_ctrl: PrepDepth %0d > QueueDepth %0d", PrepDepth, QueueDepth);
  end
  if (RefPerBank && (RefUrgent < 1 || RefUrgent > 255 || RefSpacing < 1)) begin : g_bad_refresh
    $error("tpu_hbm_ctrl: RefUrgent %0d (1..255) or RefSpacing %0d (>= 1) out of range",
           RefUrgent, RefSpacing);
  end

  // ---------------------------------------------------------------- state
  logic [EW-1:0]             rq_q [QueueDepth];         // entry i older than entry i + 1
  logic [EW-1:0]             rq_d [QueueDepth];
  logic [EW-1:0]             wq_q [QueueDepth];
  logic [EW-1:0]             wq_d [QueueDepth];
  // Write data stays where it was stored: each write queue entry names its slot (the slot
  // indices shift with the entries; the data does not); a write takes the lowest free slot.
  logic [WW-1:0]             wdat_q [QueueDepth];       // write {strb, data}, by slot
  logic [QIW-1:0]            wslot_q [QueueDepth];      // per write queue entry: its slot
  logic [QIW-1:0]            wslot_d [QueueDepth];
  logic [QueueDepth-1:0]     free_q;                    // slot k is free
  logic [QIW-1:0]            free_slot;                 // the lowest free slot
  logic [QW-1:0]             rq_cnt_q, rq_cnt_d, wq_cnt_q, wq_cnt_d;
  logic                      wmode_q, wmode_d;          // draining writes
  logic [15:0]               wage_q;                    // cycles writes waited in read mode
  logic                      aged_q, aged_d;            // this drain was forced by WriteMaxAge
  logic [7:0]                wdrain_q;                  // WRs issued in this write drain (saturates)
  logic [QW-1:0]             wold_q, wold_d;            // writes a drain left behind, not yet
                                                        // issued (the oldest: queue entries 0..)
  logic [NB-1:0]             open_q, open_d;
  // Per bank, as arrays written at the command's bank (a bank's entry is read by index; in the
  // verilated model a computed slice of a packed vector costs a wide-vector helper call).
  logic [13:0]               orow_q [NB];               // the open row (valid while open)
  logic [HW-1:0]             hits_q [NB];               // column commands since the ACT
  logic                      leave_q, leave_d;          // the mode ends once its fresh rows are
                                                        // served (row commands: its oldest only)
  logic                      gave_q, gave_d;            // this mode began as the other gave way
  logic [NB*TW-1:0]          act_cnt_q, act_cnt_d;      // per bank: until ACT legal
  logic [NB*TW-1:0]          col_cnt_q, col_cnt_d;      //           until RD/WR legal
  logic [NB*TW-1:0]          pre_cnt_q, pre_cnt_d;      //           until PRE legal
  logic [4*TW-1:0]           rrd_cnt_q, rrd_cnt_d;      // per bank group: ACT
  logic [4*TW-1:0]           rd_cnt_q, rd_cnt_d;        //                 RD
  logic [4*TW-1:0]           wr_cnt_q, wr_cnt_d;        //                 WR
  logic [4*TW-1:0]           faw_q, faw_d;              // tFAW window of the last 4 ACTs
  logic [TW-1:0]             ref_cnt_q, ref_cnt_d;      // until REF legal (tRP, tRFC)
  logic [TW-1:0]             gact_cnt_q, gact_cnt_d;    // until any ACT or REFSB legal
                                                        // (tRFC after REF, tRREFD after REFSB)
  logic [15:0]               refi_q;                    // cycles into the refresh interval
  logic                      ref_pend_q;                // a REF is due
  logic [NB-1:0]             ref_col_q;                 // banks given a RD/WR while REF due
  logic [5:0]                ref_wait_q;                // cycles the REF has been due
  // Single-bank refresh (RefPerBank).
  logic [7:0]                sb_owed_q;                 // REFSBs owed (saturates)
  logic [NB-1:0]             sb_done_q;                 // banks refreshed in this set
  logic                      sb_tgt_v_q;                // a bank is chosen for the next REFSB
  logic [3:0]                sb_tgt_q;                  // {bank, bank group}
  logic [TW-1:0]             sb_next_q;                 // until the next bank may be chosen
  // Per group of four banks (one bank address, the four bank groups: {bank, bg}[3:2]).
  logic [4*7-1:0]            gq_q;                      // requests queued (both queues)
  logic [4*4-1:0]            gage_q;                    // 32-cycle ticks since its last RD/WR

  // ---------------------------------------------------------------- front end
  logic [22:0] req_burst;
  logic        hz_wq, hz_rq, req_fire;
  logic        unused_addr_lsbs;

  // The address map: the burst address as a queue entry {row, column, bank, bank group}.
  assign req_burst        = ColLow ? {req_addr_i[27:14], req_addr_i[11:7], req_addr_i[13:12],
                                      req_addr_i[6:5]}
                                   : req_addr_i[27:5];
  assign unused_addr_lsbs = ^req_addr_i[4:0];

  always_comb begin
    hz_wq = 1'b0;
    hz_rq = 1'b0;
    // Only a request's address is checked (ready is defined only with valid): this logic depends
    // on the inputs, so a simulator re-evaluates it whenever they change.
    if (req_valid_i) begin
      for (int i = 0; i < QueueDepth; i++) begin
        if (QW'(i) < wq_cnt_q && wq_q[i][22:0] == req_burst) hz_wq = 1'b1;
        if (QW'(i) < rq_cnt_q && rq_q[i][22:0] == req_burst) hz_rq = 1'b1;
      end
    end
  end

  assign req_ready_o = !hz_wq && (req_write_i ? (!hz_rq && wq_cnt_q < QW'(QueueDepth))
                                              : (rq_cnt_q < QW'(QueueDepth)));
  assign req_fire    = req_valid_i && req_ready_o;
  logic rq_push, wq_push;                                 // a read / write request accepted
  assign rq_push     = req_fire && !req_write_i;
  assign wq_push     = req_fire && req_write_i;

  // ---------------------------------------------------------------- response side state
  logic [IdW+255:0]         resp_q [RespDepth];           // {id, data}
  logic [RIW-1:0]           resp_wp_q, resp_rp_q;
  logic [RW-1:0]            resp_cnt_q;
  logic [IdW-1:0]           inf_q [RespDepth];            // ids of RDs in flight
  logic [RIW-1:0]           inf_wp_q, inf_rp_q;
  logic [RW-1:0]            inf_cnt_q;
  logic                     rbeat_q;                      // next read beat is beat 1
  logic [127:0]             rlo_q;                        // beat 0 of the burst
  logic [IdW-1:0]           wd_q [WdDepth];               // write completions
  logic [2:0]               wd_wp_q, wd_rp_q;
  logic [3:0]               wd_cnt_q;
  logic [WW-1:0]            wf_q [WfDepth];               // write data issued, not yet sent
  logic [1:0]               wf_wp_q, wf_rp_q;
  logic [2:0]               wf_cnt_q;
  logic [CWL:0]             wr_hist_q;                    // bit k: a WR k + 1 cycles ago

  logic rd_credit, wr_room;
  assign rd_credit = (RW + 1)'(resp_cnt_q) + (RW + 1)'(inf_cnt_q) < (RW + 1)'(RespDepth);
  assign wr_room   = wd_cnt_q < 4'(WdDepth) && wf_cnt_q < 3'(WfDepth);

  // ---------------------------------------------------------------- scheduler
  logic [QW-1:0]            scnt;
  logic [QueueDepth-1:0]    hit_v, blk_v;
  logic [NB-1:0]            pend_hit, cap_blk;
  logic [NB-1:0]            col_rdy, act_rdy, pre_rdy;      // per bank: legal now (timing)
  logic [QueueDepth-1:0]    in_bank [NB];                   // [b][i]: entry i is valid and
                                                            // for bank b
  logic [QueueDepth-1:0]    col_v, act_v, pre_v;            // per entry: legal now
  logic                     faw_ok;
  logic                     col_found, row_found;
  logic [QIW-1:0]           col_idx, row_idx;
  logic                     row_is_act;
  logic                     pre_ref_found;
  logic                     ref_late;
  logic [3:0]               pre_ref_bank;
  logic                     prep_found, prep_act;       // a row command for the other queue
  logic [EW-1:0]            prep_e;
  logic [NB-1:0]            claimed;                    // banks an older prep candidate names
  logic [NB-1:0]            fresh;                      // per bank: a row opened and not yet
                                                        // given a RD/WR (its request is queued)
  logic [NB-1:0]            srv_hit;                    // a queued hit of this mode may issue
  logic [NB-1:0]            own_fr;                     // fresh, such a hit, not issued this cycle
  logic                     own_fresh;
  logic                     old_blk;                    // the oldest request's bank holds a
                                                        // fresh row it has no hit for
  assign own_fresh = own_fr != '0;

  // Entry i of the other mode's queue (its oldest PrepDepth are looked at, for row preparation).
  function automatic logic [EW-1:0] oq(input logic [QIW-1:0] i);
    oq = wmode_q ? rq_q[i] : wq_q[i];
  endfunction

  // Entry i of the current mode's queue (read where needed: no per-cycle copy of the queue).
  function automatic logic [EW-1:0] sq(input logic [QIW-1:0] i);
    sq = wmode_q ? wq_q[i] : rq_q[i];
  endfunction
  assign scnt   = wmode_q ? wq_cnt_q : rq_cnt_q;
  assign faw_ok = faw_q[3*TW +: TW] == '0;
  // REF due: each open bank may take one more column command within RefGrace cycles.
  assign ref_late = ref_wait_q >= 6'(RefGrace);

  always_comb begin
    logic [3:0]    b;
    logic          v;
    logic [EW-1:0] e;
    b        = '0;
    v        = 1'b0;
    e        = '0;
    hit_v    = '0;
    blk_v    = '0;
    pend_hit = '0;
    cap_blk  = '0;
    for (int k = 0; k < NB; k++) in_bank[k] = '0;
    col_v    = '0;
    act_v    = '0;
    pre_v    = '0;
    col_found  = 1'b0;
    row_found  = 1'b0;
    old_blk    = 1'b0;
    srv_hit    = '0;
    col_idx    = '0;
    row_idx    = '0;
    row_is_act = 1'b0;
    // An empty queue finds nothing: the per-entry search is skipped (saves simulation time).
    if (scnt != '0) begin
      // Entries at or beyond the count are skipped (the simulator does no work for them).
      for (int i = 0; i < QueueDepth; i++) begin
        v = QW'(i) < scnt;
        if (v) begin
          e = sq(QIW'(i));
          b = e[3:0];
          hit_v[i] = open_q[b] && orow_q[b] == e[22:9];
          if (hit_v[i]) pend_hit[b] = 1'b1;
          in_bank[b][i] = 1'b1;
          // (Under a constant-false OrderById the loop goes too: the simulator kept it empty.)
          if (OrderById) begin
            for (int j = 0; j < i; j++) begin
              if (sq(QIW'(j)) >> 23 == e >> 23) blk_v[i] = 1'b1;
            end
          end
        end
      end
      // The oldest request misses in a bank that has served RowHitCap hits: no more hits there.
      e = sq('0);
      b = e[3:0];
      if (!hit_v[0] && open_q[b] && hits_q[b] >= HW'(RowHitCap)) cap_blk[b] = 1'b1;

      // Each entry's legal commands from its bank's (col_rdy, act_rdy, pre_rdy: once per bank,
      // not per entry) as bit masks; then the oldest of each kind.
      for (int k = 0; k < NB; k++) begin
        if (col_rdy[k] && !cap_blk[k]) col_v = col_v | in_bank[k];
        if (act_rdy[k]) act_v = act_v | in_bank[k];
        if (pre_rdy[k] && !pend_hit[k] && !fresh[k]) pre_v = pre_v | in_bank[k];
      end
      // The oldest request may precharge its bank even with hits pending there, but not a fresh
      // row no request of this mode hits (opened for the other queue): this mode gives way
      // (old_blk), unless it began so itself and none of its hits may issue (per-id ordering
      // would make both modes wait).
      for (int k = 0; k < NB; k++) srv_hit[k] = (in_bank[k] & hit_v & ~blk_v) != '0;
      old_blk = !hit_v[0] && fresh[b] && !pend_hit[b];
      if (pre_rdy[b] && (!old_blk || (gave_q && srv_hit == '0))) pre_v[0] = 1'b1;
      col_v = col_v & hit_v & ~blk_v;
      pre_v = pre_v & ~hit_v;
      // The oldest (lowest-index) legal entry of each kind: priority encoders.
      col_found  = col_v != '0;
      col_idx    = lowest_set(col_v);
      row_found  = (act_v | pre_v) != '0;
      row_idx    = lowest_set(act_v | pre_v);
      row_is_act = act_v[row_idx];
    end

    // Row preparation: the other queue's oldest entries, in banks this mode's queue does not use,
    // may have their rows opened (or a conflicting row closed) in cycles this mode leaves idle,
    // so a switch between reads and writes does not start with tRP + tRCD of bus silence.
    // The oldest candidate wins; a bank an older candidate names is left to it (else a younger
    // entry's PRE could close the row just opened for an older one, over and over).
    prep_found = 1'b0;
    prep_act   = 1'b0;
    prep_e     = '0;
    claimed    = '0;
    for (int i = 0; i < PrepDepth; i++) begin
      if (QW'(i) < (wmode_q ? rq_cnt_q : wq_cnt_q)) begin
        e = oq(QIW'(i));
        b = e[3:0];
        if (!prep_found && !claimed[b] && in_bank[b] == '0) begin
          // (a write's row only once WriteHigh - WriteLow writes are queued: a drain is near, and
          // until it comes the fresh row keeps reads out of its bank)
          if (act_rdy[b] && (wmode_q || 32'(wq_cnt_q) >= WriteHigh - WriteLow)) begin
            prep_found = 1'b1;
            prep_act   = 1'b1;
            prep_e     = e;
          end else if (pre_rdy[b] && !fresh[b] && orow_q[b] != e[22:9]) begin
            prep_found = 1'b1;
            prep_e     = e;
          end
        end
        claimed[b] = 1'b1;
      end
    end

    pre_ref_found = 1'b0;
    pre_ref_bank  = '0;
    if (ref_pend_q) begin  // (used only then)
      for (int k = NB - 1; k >= 0; k--) begin
        if (open_q[k] && pre_cnt_q[TW*k +: TW] == '0 &&
            (ref_late || ref_col_q[k] || (!pend_hit[k] && !fresh[k]))) begin
          pre_ref_found = 1'b1;
          pre_ref_bank  = 4'(k);
        end
      end
    end
  end

  // Single-bank refresh: the next bank to refresh (a cycle later it is the target), and
  // whether the target's PRE or REFSB is legal now.
  logic          sb_urgent, sb_pick_v, sb_pre, sb_ref;
  logic [NB-1:0] sb_ok;                                   // per bank: closed, REFSB timing met
  logic [3:0]    sb_pick;
  logic [NB-1:0] sb_tgt_m;                                // the target bank, as a mask
  assign sb_urgent = sb_owed_q >= 8'(RefUrgent);
  assign sb_tgt_m  = sb_tgt_v_q ? NB'(1) << sb_tgt_q : '0;
  // A group of the four banks that share a bank address (a stream uses all four at once): no
  // request queued for any of them.
  logic [3:0] grp_idle;
  for (genvar g = 0; g < 4; g++) begin : g_grp_idle
    assign grp_idle[g] = gq_q[7*g +: 7] == '0;
  end
  always_comb begin
    logic [3:0] best;
    sb_pick_v = 1'b0;
    sb_pick   = '0;
    best      = '1;
    if (RefPerBank && !sb_tgt_v_q && sb_owed_q != '0 && (sb_next_q == '0 || sb_urgent)) begin
      // The candidate used most recently (the lowest index among equals).
      for (int k = NB - 1; k >= 0; k--) begin
        if (!sb_done_q[k] && !fresh[k] && !(issue_act && cmd_bank == 4'(k)) &&
            (sb_urgent || grp_idle[k / 4]) &&
            (!sb_pick_v || gage_q[4*(k/4) +: 4] <= best)) begin
          sb_pick   = 4'(k);
          best      = gage_q[4*(k/4) +: 4];
          sb_pick_v = 1'b1;
        end
      end
    end
  end
  assign sb_pre = sb_tgt_v_q && pre_rdy[sb_tgt_q];
  assign sb_ref = sb_tgt_v_q && sb_ok[sb_tgt_q] && gact_cnt_q == '0;

  // What each bank allows now (timing, refresh, the data bus), constant slices per bank.
  for (genvar k = 0; k < NB; k++) begin : g_bank_rdy
    assign fresh[k]   = open_q[k] && hits_q[k] == '0;
    assign own_fr[k]  = fresh[k] && srv_hit[k] && !((issue_rd || issue_wr) && cmd_bank == 4'(k));
    assign col_rdy[k] = col_cnt_q[TW*k +: TW] == '0 && !sb_tgt_m[k] &&
                        !(ref_pend_q && (ref_late || ref_col_q[k])) &&
                        (wmode_q ? (wr_cnt_q[TW*(k % 4) +: TW] == '0 && wr_room)
                                 : (rd_cnt_q[TW*(k % 4) +: TW] == '0 && rd_credit));
    assign act_rdy[k] = !open_q[k] && act_cnt_q[TW*k +: TW] == '0 && !sb_tgt_m[k] &&
                        rrd_cnt_q[TW*(k % 4) +: TW] == '0 && faw_ok && gact_cnt_q == '0;
    assign pre_rdy[k] = open_q[k] && pre_cnt_q[TW*k +: TW] == '0;
    assign sb_ok[k]   = !open_q[k] && act_cnt_q[TW*k +: TW] == '0 &&
                        rrd_cnt_q[TW*(k % 4) +: TW] == '0;
  end

  // The command of this cycle.
  logic          issue_rd, issue_wr, issue_act, issue_pre, issue_ref, issue_refsb;
  logic [EW-1:0] sel;
  logic [3:0]    cmd_bank;                                // {bank, bank group}

  always_comb begin
    issue_rd  = 1'b0;
    issue_wr  = 1'b0;
    issue_act = 1'b0;
    issue_pre = 1'b0;
    issue_ref = 1'b0;
    issue_refsb = 1'b0;
    sel       = '0;
    if (ref_pend_q && !col_found) begin
      if (pre_ref_found) issue_pre = 1'b1;
      else if (open_q == '0 && ref_cnt_q == '0) issue_ref = 1'b1;
      sel[3:0] = pre_ref_bank;
    end else if (col_found) begin
      issue_rd = !wmode_q;
      issue_wr = wmode_q;
      sel      = sq(col_idx);
    end else if (sb_pre || sb_ref) begin
      issue_pre   = sb_pre;
      issue_refsb = sb_ref;
      sel[3:0]    = sb_tgt_q;
    end else if (row_found && !ref_pend_q && (!leave_q || row_idx == '0)) begin
      issue_act = row_is_act;
      issue_pre = !row_is_act;
      sel       = sq(row_idx);
    end else if (prep_found && !ref_pend_q) begin
      issue_act = prep_act;
      issue_pre = !prep_act;
      sel       = prep_e;
    end
  end

  assign cmd_bank    = sel[3:0];
  assign cmd_valid_o = issue_rd || issue_wr || issue_act || issue_pre || issue_ref || issue_refsb;
  assign cmd_o       = issue_act ? CmdAct : issue_rd ? CmdRd : issue_wr ? CmdWr :
                       issue_pre ? CmdPre : issue_ref ? CmdRef : issue_refsb ? CmdRefSb : CmdAct;
  // For waveforms only (waves/chip.gtkw shows it by name through the hbmcmd translate filter):
  // the command on the pins this cycle, 0 none, else 1 + cmd_o. Nothing reads it; synthesis
  // drops it.
  /* verilator lint_off UNUSEDSIGNAL */
  logic [2:0] cmd_trace;
  /* verilator lint_on UNUSEDSIGNAL */
  assign cmd_trace = cmd_valid_o ? cmd_o + 3'd1 : 3'd0;
  assign bg_o        = sel[1:0];
  assign bank_o      = sel[3:2];
  assign row_o       = sel[22:9];
  assign col_o       = sel[8:4];

  // ---------------------------------------------------------------- next state
  always_comb begin
    logic [QW-1:0] after;
    logic          leave;
    // queues: remove the issued entry (the rest shift down, keeping age order), append new
    for (int i = 0; i < QueueDepth; i++) begin
      rq_d[i]    = rq_q[i];
      wq_d[i]    = wq_q[i];
      wslot_d[i] = wslot_q[i];
    end
    if (issue_rd) begin
      for (int i = 0; i < QueueDepth - 1; i++) begin
        if (QIW'(i) >= col_idx) rq_d[i] = rq_q[i + 1];
      end
    end
    if (issue_wr) begin
      for (int i = 0; i < QueueDepth - 1; i++) begin
        if (QIW'(i) >= col_idx) begin
          wq_d[i]    = wq_q[i + 1];
          wslot_d[i] = wslot_q[i + 1];
        end
      end
    end
    after = rq_cnt_q - QW'(issue_rd);
    if (rq_push) begin
      rq_d[QIW'(after)] = {req_id_i, req_burst};
      after = after + QW'(1);
    end
    rq_cnt_d = after;
    after = wq_cnt_q - QW'(issue_wr);
    if (wq_push) begin
      wq_d[QIW'(after)]    = {req_id_i, req_burst};
      wslot_d[QIW'(after)] = free_slot;
      after = after + QW'(1);
    end
    wq_cnt_d = after;

    // writes a drain leaves behind are its oldest: the next drain issues them all before it ends
    wold_d = wold_q - QW'(issue_wr && QW'(col_idx) < wold_q);
    // mode: a switch waits until each fresh row a request of this mode may use has had its RD/WR
    wmode_d = wmode_q;
    aged_d  = aged_q;
    if (!wmode_q) begin
      leave = wq_cnt_d != '0 && (wq_cnt_d >= QW'(WriteHigh) || rq_cnt_d == '0 ||
                                 (old_blk && !gave_q) ||
                                 (rq_cnt_d <= QW'(ReadLow) && wq_cnt_d > QW'(WriteLow)) ||
                                 (req_valid_i && hz_wq) || wage_q >= 16'(WriteMaxAge));
      aged_d = wage_q >= 16'(WriteMaxAge);
    end else begin
      leave = wq_cnt_d == '0 || (old_blk && !gave_q) ||
              (wq_cnt_d <= QW'(WriteLow) && rq_cnt_d != '0 &&
                                 wold_d == '0 &&
                                 (9'(wdrain_q) + 9'(issue_wr) >= (aged_q ? 9'(MinDrain) : 9'(1))) &&
                                 !(req_valid_i && hz_wq));
    end
    gave_d = gave_q && !issue_rd && !issue_wr;
    if (leave && !own_fresh) begin
      wmode_d = !wmode_q;
      gave_d  = old_blk;
      if (wmode_q) wold_d = wq_cnt_d;
    end
    leave_d = leave && own_fresh;

    // banks
    open_d = open_q;
    if (issue_act) open_d[cmd_bank] = 1'b1;
    if (issue_pre) open_d[cmd_bank] = 1'b0;

    // tFAW: a shift register of the last four ACTs' remaining windows (newest at 0).
    for (int k = 0; k < 4; k++) faw_d[TW*k +: TW] = bump(faw_q[TW*k +: TW], '0);
    if (issue_act) begin
      faw_d[TW +: 3*TW] = {bump(faw_q[2*TW +: TW], '0), bump(faw_q[TW +: TW], '0),
                           bump(faw_q[0 +: TW], '0)};
      faw_d[0 +: TW]    = bump('0, GapFaw);
    end
    ref_cnt_d  = bump(ref_cnt_q, issue_pre ? GapRp : issue_ref ? GapRfc : '0);
    gact_cnt_d = bump(gact_cnt_q, issue_ref ? GapRfc : issue_refsb ? GapRrefd : '0);
  end

  // Per-bank and per-bank-group timing counters: one set of assigns per bank (constant slices;
  // in the verilated model a loop over the banks wrote computed slices of 256-bit vectors).
  for (genvar k = 0; k < NB; k++) begin : g_bank_cnt
    logic here;                                           // this cycle's command is for bank k
    assign here = cmd_bank == 4'(k);
    assign act_cnt_d[TW*k +: TW] = bump(act_cnt_q[TW*k +: TW],
                                        !here ? '0 : issue_act ? GapRc : issue_pre ? GapRp :
                                        issue_refsb ? GapRfcsb : '0);
    assign col_cnt_d[TW*k +: TW] = bump(col_cnt_q[TW*k +: TW], (here && issue_act) ? GapRcd : '0);
    assign pre_cnt_d[TW*k +: TW] = bump(pre_cnt_q[TW*k +: TW],
                                        !here ? '0 : issue_act ? GapRas : issue_rd ? GapRtp :
                                        issue_wr ? GapWr : '0);
  end
  for (genvar k = 0; k < 4; k++) begin : g_group_cnt
    logic same;                                           // this cycle's command is in group k
    assign same = sel[1:0] == 2'(k);
    assign rrd_cnt_d[TW*k +: TW] = bump(rrd_cnt_q[TW*k +: TW],
                                        issue_act ? (same ? GapRrdL : GapRrdS) : '0);
    assign rd_cnt_d[TW*k +: TW]  = bump(rd_cnt_q[TW*k +: TW],
                                        issue_rd ? (same ? GapCcdL : GapCcdS) :
                                        issue_wr ? (same ? GapWtrL : GapWtrS) : '0);
    assign wr_cnt_d[TW*k +: TW]  = bump(wr_cnt_q[TW*k +: TW],
                                        issue_wr ? (same ? GapCcdL : GapCcdS) :
                                        issue_rd ? GapRdWr : '0);
  end

  // Per group: requests queued, both queues (a request accepted adds one, its RD/WR takes it
  // off), and its age: 32-cycle ticks (saturating at 15) since its last RD/WR. The ticks follow
  // the refresh timer (every 32nd cycle of the interval), so the controller's state at a given
  // phase of the interval depends only on the traffic (ChipSim rings doorbells at that phase).
  logic age_tick;
  assign age_tick = refi_q[4:0] == 5'd31;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      gq_q   <= '0;
      gage_q <= '1;
    end else begin
      for (int g = 0; g < 4; g++) begin
        logic add, sub;
        add = req_fire && req_burst[3:2] == 2'(g);
        sub = (issue_rd || issue_wr) && cmd_bank[3:2] == 2'(g);
        if (add && !sub) gq_q[7*g +: 7] <= gq_q[7*g +: 7] + 7'd1;
        else if (sub && !add) gq_q[7*g +: 7] <= gq_q[7*g +: 7] - 7'd1;
        if (sub) gage_q[4*g +: 4] <= '0;
        else if (age_tick && gage_q[4*g +: 4] != '1) gage_q[4*g +: 4] <= gage_q[4*g +: 4] + 4'd1;
      end
    end
  end

  // Single-bank refresh state: 16 REFSBs owed each TREFI; a REFSB pays one, marks its bank done
  // (a full set starts the next) and frees the choice of the next bank after RefSpacing.
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      sb_owed_q  <= '0;
      sb_done_q  <= '0;
      sb_tgt_v_q <= 1'b0;
      sb_tgt_q   <= '0;
      sb_next_q  <= '0;
    end else if (RefPerBank) begin
      logic [8:0]    owed;
      logic [NB-1:0] done;
      owed = 9'(sb_owed_q) + ((refi_q == 16'(TREFI - 1)) ? 9'(NB) : 9'd0) - 9'(issue_refsb);
      sb_owed_q <= owed > 9'd255 ? 8'd255 : owed[7:0];
      done = sb_done_q | (issue_refsb ? sb_tgt_m : '0);
      sb_done_q  <= (done == '1) ? '0 : done;
      sb_tgt_v_q <= issue_refsb ? 1'b0 : (sb_tgt_v_q || sb_pick_v);
      if (sb_pick_v) sb_tgt_q <= sb_pick;
      sb_next_q  <= bump(sb_next_q, issue_refsb ? GapSbNext : '0);
    end
  end

  // Per-bank row state at the command's bank: an ACT opens a row and restarts its hit count,
  // each column command counts one hit up to RowHitCap (one command a cycle: never both). No
  // reset: both are read only while their bank is open (open_q), and the ACT sets both.
  always_ff @(posedge clk_i) begin
    if (issue_act) begin
      orow_q[cmd_bank] <= sel[22:9];
      hits_q[cmd_bank] <= '0;
    end else if ((issue_rd || issue_wr) && hits_q[cmd_bank] != HW'(RowHitCap)) begin
      hits_q[cmd_bank] <= hits_q[cmd_bank] + HW'(1);
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rq_cnt_q   <= '0;
      wq_cnt_q   <= '0;
      wmode_q    <= 1'b0;
      leave_q    <= 1'b0;
      gave_q     <= 1'b0;
      wold_q     <= '0;
      wage_q     <= '0;
      wdrain_q   <= '0;
      aged_q     <= 1'b0;
      open_q     <= '0;
      act_cnt_q  <= '0;
      col_cnt_q  <= '0;
      pre_cnt_q  <= '0;
      rrd_cnt_q  <= '0;
      rd_cnt_q   <= '0;
      wr_cnt_q   <= '0;
      faw_q      <= '0;
      ref_cnt_q  <= '0;
      gact_cnt_q <= '0;
      refi_q     <= '0;
      ref_pend_q <= 1'b0;
      ref_col_q  <= '0;
      ref_wait_q <= '0;
    end else begin
      rq_cnt_q   <= rq_cnt_d;
      wq_cnt_q   <= wq_cnt_d;
      wmode_q    <= wmode_d;
      leave_q    <= leave_d;
      gave_q     <= gave_d;
      wold_q     <= wold_d;
      aged_q     <= aged_d;
      wdrain_q   <= !wmode_q ? '0 : (issue_wr && wdrain_q != 8'hFF) ? wdrain_q + 8'(1) : wdrain_q;
      wage_q     <= (wmode_q || wq_cnt_q == '0) ? '0 :
                    (wage_q == 16'hFFFF) ? wage_q : wage_q + 16'(1);
      open_q     <= open_d;
      act_cnt_q  <= act_cnt_d;
      col_cnt_q  <= col_cnt_d;
      pre_cnt_q  <= pre_cnt_d;
      rrd_cnt_q  <= rrd_cnt_d;
      rd_cnt_q   <= rd_cnt_d;
      wr_cnt_q   <= wr_cnt_d;
      faw_q      <= faw_d;
      ref_cnt_q  <= ref_cnt_d;
      gact_cnt_q <= gact_cnt_d;
      refi_q     <= (refi_q == 16'(TREFI - 1)) ? '0 : refi_q + 16'(1);
      if (refi_q == 16'(TREFI - 1) && !RefPerBank) ref_pend_q <= 1'b1;
      else if (issue_ref) ref_pend_q <= 1'b0;
      ref_col_q  <= ref_pend_q ? (ref_col_q | (NB'(issue_rd || issue_wr) << cmd_bank)) : '0;
      ref_wait_q <= (!ref_pend_q || ref_late) ? ref_wait_q & {6{ref_pend_q}} :
                    ref_wait_q + 6'(1);
    end
  end

  // Write data slots: a write takes the lowest free slot when accepted and frees it when its
  // WR issues (a slot is free whenever the write queue has room: one slot per entry).
  logic [QIW-1:0] wr_slot;                                // the issuing write's slot
  assign wr_slot = wslot_q[col_idx];
  assign free_slot = lowest_set(free_q);

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      free_q  <= '1;
    end else begin
      logic [QueueDepth-1:0] f;
      f = free_q;
      if (wq_push) f[free_slot] = 1'b0;
      if (issue_wr) f[wr_slot] = 1'b1;
      free_q <= f;
    end
  end

  // Queue entries (not reset: read only below the counts), one process per entry.
  for (genvar i = 0; i < QueueDepth; i++) begin : g_entry
    always_ff @(posedge clk_i) begin
      rq_q[i]    <= rq_d[i];
      wq_q[i]    <= wq_d[i];
      wslot_q[i] <= wslot_d[i];
    end
  end

  // Write data (not reset: read only from slots the queue holds).
  always_ff @(posedge clk_i) begin
    if (wq_push) wdat_q[free_slot] <= {req_wstrb_i, req_wdata_i};
  end

  // ---------------------------------------------------------------- write data and completions
  logic wbeat0, wbeat1, wd_pop, rd_pop, rbeat_last;
  logic [WW-1:0] wf_head;
  assign wbeat0  = wr_hist_q[CWL - 1];
  assign wbeat1  = wr_hist_q[CWL];
  assign wf_head = wf_q[wf_rp_q];
  assign wdata_valid_o = wbeat0 || wbeat1;
  assign wdata_o       = wbeat0 ? wf_head[127:0] : wbeat1 ? wf_head[255:128] : '0;
  assign wdata_strb_o  = wbeat0 ? wf_head[271:256] : wbeat1 ? wf_head[287:272] : '0;

  assign wr_done_valid_o = wd_cnt_q != '0;
  assign wr_done_id_o    = wd_q[wd_rp_q];
  assign wd_pop          = wr_done_valid_o && wr_done_ready_i;

  assign rd_valid_o = resp_cnt_q != '0;
  assign rd_id_o    = resp_q[resp_rp_q][IdW+255:256];
  assign rd_data_o  = resp_q[resp_rp_q][255:0];
  assign rd_pop     = rd_valid_o && rd_ready_i;
  assign rbeat_last = rdata_valid_i && rbeat_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      wr_hist_q  <= '0;
      wf_wp_q    <= '0;
      wf_rp_q    <= '0;
      wf_cnt_q   <= '0;
      wd_wp_q    <= '0;
      wd_rp_q    <= '0;
      wd_cnt_q   <= '0;
      resp_wp_q  <= '0;
      resp_rp_q  <= '0;
      resp_cnt_q <= '0;
      inf_wp_q   <= '0;
      inf_rp_q   <= '0;
      inf_cnt_q  <= '0;
      rbeat_q    <= 1'b0;
    end else begin
      wr_hist_q <= {wr_hist_q[CWL - 1:0], issue_wr};
      if (issue_wr) wf_wp_q <= wf_wp_q + 2'(1);
      if (wbeat1) wf_rp_q <= wf_rp_q + 2'(1);
      wf_cnt_q <= wf_cnt_q + 3'(issue_wr) - 3'(wbeat1);
      if (issue_wr) wd_wp_q <= wd_wp_q + 3'(1);
      if (wd_pop) wd_rp_q <= wd_rp_q + 3'(1);
      wd_cnt_q <= wd_cnt_q + 4'(issue_wr) - 4'(wd_pop);
      if (issue_rd) inf_wp_q <= (inf_wp_q == RIW'(RespDepth - 1)) ? '0 : inf_wp_q + RIW'(1);
      if (rbeat_last) inf_rp_q <= (inf_rp_q == RIW'(RespDepth - 1)) ? '0 : inf_rp_q + RIW'(1);
      inf_cnt_q <= inf_cnt_q + RW'(issue_rd) - RW'(rbeat_last);
      if (rbeat_last) resp_wp_q <= (resp_wp_q == RIW'(RespDepth - 1)) ? '0 : resp_wp_q + RIW'(1);
      if (rd_pop) resp_rp_q <= (resp_rp_q == RIW'(RespDepth - 1)) ? '0 : resp_rp_q + RIW'(1);
      resp_cnt_q <= resp_cnt_q + RW'(rbeat_last) - RW'(rd_pop);
      if (rdata_valid_i) rbeat_q <= !rbeat_q;
    end
  end

  // Storage (not reset; read only where the counts say an entry is held).
  always_ff @(posedge clk_i) begin
    if (issue_wr) begin
      wf_q[wf_wp_q] <= wdat_q[wr_slot];
      wd_q[wd_wp_q] <= sel[EW-1:23];
    end
    if (issue_rd) inf_q[inf_wp_q] <= sel[EW-1:23];
    if (rdata_valid_i && !rbeat_q) rlo_q <= rdata_i;
    if (rbeat_last) resp_q[resp_wp_q] <= {inf_q[inf_rp_q], rdata_i, rlo_q};
  end

  assign busy_o = rq_cnt_q != '0 || wq_cnt_q != '0 || inf_cnt_q != '0 || resp_cnt_q != '0 ||
                  wd_cnt_q != '0 || wf_cnt_q != '0;

  // ---------------------------------------------------------------- invariants
  `TPU_ASSERT_IMPLIES(ReadDataOnlyWhenExpected, rdata_valid_i, inf_cnt_q != '0)
  `TPU_ASSERT(ResponseFifoNeverOverflows, resp_cnt_q <= RW'(RespDepth))
  `TPU_ASSERT_IMPLIES(NoCommandToOpenBankAct, issue_act, !open_q[cmd_bank])
  `TPU_ASSERT_IMPLIES(ColumnOnlyToOpenBank, (issue_rd || issue_wr), open_q[cmd_bank])
  `TPU_ASSERT_IMPLIES(RefOnlyWithAllClosed, issue_ref, open_q == '0)
  `TPU_ASSERT_IMPLIES(RefSbOnlyToClosedBank, issue_refsb, !open_q[cmd_bank])
  `TPU_ASSERT_IMPLIES(NoActDuringRefSb, issue_act, !sb_tgt_m[cmd_bank])
endmodule
