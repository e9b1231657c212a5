// tpu_seq: the sequencer (docs/isa.md). On start_i it fetches 16-byte instructions from HBM at
// prog_addr_i through a read port of the memory system (32-byte bursts, up to FetchBursts in
// flight, into a FetchDepth-entry buffer), decodes one instruction per cycle in program order
// and either executes it (NOP, IRQ, FENCE, HALT) or appends it to the queue of its unit (DMA,
// MXU, VPU; QDepth entries each). Decode checks everything static: opcode, reserved bits, field
// values, the MXU/VPU UB and ACC ranges, the MXU tile count and the wait rule (a WAIT needs at
// least `value` SIGNALs to its counter dispatched before it); a failure faults with the PC. At
// the head of each unit queue the sequencer itself executes the sync instructions — a WAIT
// leaves the queue when its counter reaches the value, a SIGNAL when the unit is idle (all its
// earlier instructions complete), incrementing the counter — and hands every other instruction
// to the unit (valid/ready, with its PC). On a fault (decode, fetch beyond HBM or a unit's) it
// stops dispatching, flushes the queues, asserts abort_o until the units are idle and the
// fetches have drained, then reports STATUS faulted. HALT waits for every queue and unit to be
// empty and idle. Throughput: one instruction decoded per cycle; a unit gets one per cycle.
// REPEAT count, len (docs/isa.md, "Loops"): the next len instructions are decoded count times
// from the fetch buffer, which holds the body until its last iteration (so FetchDepth is at
// least twice the longest body); in iteration i, w1 of VPU.LD / VPU.ST / VPU.LI / WAIT is
// w1 + i * w2 (their per-iteration step), and those instructions reach the queues with w2 = 0.
// Multi-chip (docs/isa.md): a remote SIGNAL (DMA queue, link next/prev) leaves the queue when
// the DMA is idle and the link takes the signal flit (rsig_*); remote counters RC0..RC15 count
// the neighbours' signals (rc_inc_i) and remote WAITs wait on them. Remote ops on a link that
// is not up fault LINK_DOWN at decode; a remote WAIT with no link up faults SYNC_DEADLOCK.
`include "tpu_assert.svh"

module tpu_seq #(
  parameter int unsigned N           = 16,           // MXU size = VPU lanes (power of two)
  parameter int unsigned UbBytes     = 262144,       // unified buffer bytes
  parameter int unsigned AccRows     = 1024,         // accumulator rows
  parameter int unsigned QDepth      = 32,           // per unit queue (power of two)
  parameter int unsigned FetchDepth  = 64,           // fetched instructions buffered (pow 2)
  localparam int unsigned Units      = 3             // 0 DMA, 1 MXU, 2 VPU
) (
  input  logic                 clk_i,
  input  logic                 rst_ni,
  // control and status (the CSR block)
  input  logic                 start_i,              // doorbell: run from prog_addr_i
  input  logic [31:0]          prog_addr_i,          // byte address, multiple of 16
  output logic [1:0]           status_o,             // tpu_isa_pkg::STATUS_*
  output logic                 done_o,               // one-cycle pulse: HALT completed
  output logic                 fault_event_o,        // one-cycle pulse: a fault was reported
  output logic [3:0]           fault_code_o,         // held until the next start
  output logic [31:0]          fault_pc_o,
  output logic [31:0]          fault_addr_o,
  output logic [31:0]          fault_info_o,
  output logic                 irq_user_o,           // one-cycle pulse: an IRQ instruction
  output logic [31:0]          irq_code_o,           // its code
  // instruction fetch: a read-only master of tpu_hbm's port protocol (docs/memory.md)
  output logic                 fetch_req_valid_o,
  input  logic                 fetch_req_ready_i,
  output logic [31:0]          fetch_req_addr_o,     // 32-byte aligned
  input  logic                 fetch_rd_valid_i,
  output logic                 fetch_rd_ready_o,
  input  logic [255:0]         fetch_rd_data_i,      // two instructions, the lower first
  input  logic                 fetch_rd_err_i,       // beyond HBM
  // units, per unit u at [W*u +: W]
  output logic [Units-1:0]     unit_valid_o,         // an instruction for unit u
  input  logic [Units-1:0]     unit_ready_i,         // taken this cycle if valid
  output logic [Units*128-1:0] unit_instr_o,
  output logic [Units*32-1:0]  unit_pc_o,
  input  logic [Units-1:0]     unit_idle_i,          // nothing taken is still in progress
  input  logic [Units-1:0]     unit_rd_idle_i,       // every operand of what it took is read
  input  logic [Units-1:0]     unit_fault_i,         // a fault (one cycle; then the unit idles)
  input  logic [Units*4-1:0]   unit_fault_code_i,
  input  logic [Units*32-1:0]  unit_fault_pc_i,
  input  logic [Units*32-1:0]  unit_fault_addr_i,
  input  logic [Units*32-1:0]  unit_fault_info_i,
  // multi-chip
  input  logic [1:0]           link_up_i,            // [0] next, [1] prev: a chip is there
  output logic                 rsig_valid_o,         // a remote SIGNAL to send ...
  output logic [1:0]           rsig_link_o,          // ... over this link ...
  output logic [3:0]           rsig_sc_o,            // ... for the neighbour's RCsc
  input  logic                 rsig_ready_i,         // the link took it
  input  logic                 tx_idle_i,            // the links' transmit queues are empty
  input  logic                 rc_inc_i,             // a neighbour's signal: RC[rc_sc_i] += 1
  input  logic [3:0]           rc_sc_i,
  output logic                 abort_o,              // drop work: a fault is being handled
  // activity, for the performance counters
  output logic                 running_o,            // a program is running
  output logic [Units-1:0]     unit_busy_o,          // unit u takes or works on an instruction
  output logic [Units-1:0]     unit_stall_o,         // unit u's queue head cannot proceed
  output logic                 instr_retired_o,      // an instruction was decoded this cycle
  output logic [Units*4-1:0]   unit_state_o,         // per unit: {blocked, on WAIT, busy, queued}
  output logic [31:0]          pc_o                  // the next instruction to decode
);
  localparam int unsigned QW   = $clog2(QDepth);
  localparam int unsigned FW   = $clog2(FetchDepth);
  localparam int unsigned EntW = 160;                   // {pc[31:0], instr[127:0]}

  typedef enum logic [2:0] {IdleS, RunS, DrainS, HaltedS, FaultedS} state_e;
  state_e state_q;

  // ---------------------------------------------------------------- REPEAT
  localparam int unsigned MaxLen = 32'(tpu_isa_pkg::REPEAT_MAX_LEN);
  localparam int unsigned LenW   = $clog2(MaxLen + 1);
  logic            loop_q;                              // decoding a REPEAT body
  logic [15:0]     loop_iter_q;                         // its iteration (0 outside a body)
  logic [15:0]     loop_count_q;                        // iterations in all
  logic [LenW-1:0] loop_len_q;                          // body instructions
  logic [LenW-1:0] loop_pos_q;                          // decoded in this iteration (held)
  logic [FW-1:0]   loop_rp_q;                           // the body's first fetch-buffer entry
  logic [31:0]     loop_pc_q;                           // its PC

  // ---------------------------------------------------------------- fetch
  logic [31:0]             fetch_addr_q;                // next burst to request
  logic [FW:0]             fb_cnt_q;                    // entries in the fetch buffer
  logic [FW-1:0]           fb_wp_q, fb_rp_q;
  logic [FetchDepth*EntW-1:0] fb_q;
  logic [FetchDepth-1:0]   fb_err_q;
  logic [FW:0]             fly_q;                       // bursts requested, not returned
  logic                    skip_q;                      // drop the first half of the next burst
  logic                    fetching_q;                  // fetch is allowed (running, no HALT)
  logic [31:0]             next_pc_q;                   // PC of the next entry written

  // Room for every burst in flight plus one more (two entries each), besides the entries of a
  // REPEAT body already decoded in this iteration (held for the next).
  assign fetch_req_valid_o = fetching_q &&
                             ({1'b0, fb_cnt_q} + (FW+2)'(loop_pos_q) + 2 * {1'b0, fly_q} +
                              (FW+2)'(2)) <= (FW+2)'(FetchDepth);
  assign fetch_req_addr_o  = {fetch_addr_q[31:5], 5'd0};
  assign fetch_rd_ready_o  = 1'b1;

  // ---------------------------------------------------------------- decode
  logic [127:0] raw, ins;
  logic [31:0]  ins_pc, w0, w1, w2, w3;
  logic         ins_valid, ins_err, stepped;
  assign raw       = fb_q[EntW*fb_rp_q +: 128];
  assign ins_pc    = fb_q[EntW*fb_rp_q + 128 +: 32];
  assign ins_err   = fb_err_q[fb_rp_q];
  assign ins_valid = state_q == RunS && fb_cnt_q != '0;
  // The instruction of this iteration: a held body entry's stepped field already holds
  // w1 + i * w2 (each decode of it in a body writes w1 + w2 back, below); units see w2 = 0.
  assign stepped = raw[7:0] == tpu_isa_pkg::OP_VPU_LD || raw[7:0] == tpu_isa_pkg::OP_VPU_ST ||
                   raw[7:0] == tpu_isa_pkg::OP_VPU_LI || raw[7:0] == tpu_isa_pkg::OP_WAIT;
  assign w0  = raw[31:0];
  assign w1  = raw[63:32];
  assign w2  = stepped ? '0 : raw[95:64];
  assign w3  = raw[127:96];
  assign ins = {w3, w2, w1, w0};

  logic [Units*QW+Units-1:0] unused_qw;
  logic [Units-1:0]          q_full, q_empty;
  logic [Units*(QW+1)-1:0]   q_cnt_q;
  logic [16*32-1:0]          sc_q;                      // sync counters, c at [32c +: 32]
  logic [16*32-1:0]          rc_q;                      // remote counters, likewise
  logic [16*32-1:0]          sig_disp_q;                // SIGNALs dispatched per counter
  logic [15:0]               sc_owned_q;                // counter c has been signalled ...
  logic [16*2-1:0]           sc_owner_q;                // ... by this unit (one per program)
  logic [15:0]               tiles_q;                   // MXU.LDW dispatched - MXU.MM dispatched
  logic                      all_quiet;                 // queues empty, units and links idle

  always_comb begin
    for (int u = 0; u < Units; u++) begin
      q_full[u]  = q_cnt_q[(QW+1)*u +: QW+1] == (QW+1)'(QDepth);
      q_empty[u] = q_cnt_q[(QW+1)*u +: QW+1] == '0;
    end
  end
  // FENCE and HALT also wait for the flits queued for the links (a remote copy is finished for
  // the DMA once its flits are queued: docs/multichip.md, "Transmit queues").
  assign all_quiet = (q_empty == '1) && (unit_idle_i == '1) && tx_idle_i;
  // DrainS ends (HALTED or FAULTED reported) when the fetches in flight are back, every unit is
  // idle and the links' transmit queues are empty.
  logic drained;
  assign drained = fly_q == '0 && unit_idle_i == '1 && tx_idle_i;

  // Static checks of the instruction at the head of the fetch buffer.
  logic        illegal, ub_bad, acc_bad, no_tiles, too_many, deadlock, link_down;
  logic [31:0] acc_bad_row;
  logic [1:0]  target;                                  // unit of a queued instruction
  logic        to_unit;                                 // goes into a unit queue
  always_comb begin
    logic [63:0] first, last, span;
    logic [31:0] rows, acc_row;
    logic [7:0]  f;
    f           = '0;
    illegal     = 1'b0;
    ub_bad      = 1'b0;
    acc_bad     = 1'b0;
    no_tiles    = 1'b0;
    too_many    = 1'b0;
    deadlock    = 1'b0;
    link_down   = 1'b0;
    acc_bad_row = '0;
    target      = 2'd0;
    to_unit     = 1'b0;
    first       = '0;
    last        = '0;
    span        = '0;
    rows        = '0;
    acc_row     = '0;
    unique case (w0[7:0])
      tpu_isa_pkg::OP_NOP, tpu_isa_pkg::OP_FENCE: illegal = w0[31:8] != '0 || w1 != '0 || w2 != '0 || w3 != '0;
      // HALT and REPEAT cannot be in a REPEAT body
      tpu_isa_pkg::OP_HALT: illegal = w0[31:8] != '0 || w1 != '0 || w2 != '0 || w3 != '0 || loop_q;
      tpu_isa_pkg::OP_REPEAT: illegal = w0[31:8] != '0 || w1[31:16] != '0 || w1 == '0 ||
                                        w2 == '0 || w2 > MaxLen || w3 != '0 || loop_q;
      tpu_isa_pkg::OP_IRQ: illegal = w0[31:8] != '0 || w2 != '0 || w3 != '0;
      tpu_isa_pkg::OP_WAIT: begin
        // w0[10]: a remote WAIT (on RCsc). The wait rule holds for local counters only; a
        // remote counter can be met only while a neighbour is there.
        illegal  = (w0 & 32'hFFFF_0800) != '0 || w0[9:8] == 2'd3 || w2 != '0 || w3 != '0;
        deadlock = w0[10] ? link_up_i == '0 : sig_disp_q[32*w0[15:12] +: 32] < w1;
      end
      tpu_isa_pkg::OP_SIGNAL: begin
        // w0[11:10]: the link of a remote SIGNAL (DMA only). Locally, one signalling unit per
        // counter: a SIGNAL of another unit could meet a WAIT before the SIGNAL the program
        // orders it after (docs/isa.md, Sync).
        // w0[16]: the reads flag (SIGNAL ..., reads)
        illegal   = (w0 & 32'hFFFE_0000) != '0 || w0[9:8] == 2'd3 || w1 != '0 || w2 != '0 ||
                    w3 != '0 || w0[11:10] == 2'd3 ||
                    (w0[11:10] != tpu_isa_pkg::LINK_LOCAL && w0[9:8] != tpu_isa_pkg::UNIT_DMA);
        link_down = w0[11:10] != tpu_isa_pkg::LINK_LOCAL && !link_up_i[w0[11]];
        deadlock  = w0[11:10] == tpu_isa_pkg::LINK_LOCAL && sc_owned_q[w0[15:12]] &&
                    sc_owner_q[2*w0[15:12] +: 2] != w0[9:8];
      end
      tpu_isa_pkg::OP_DMA_LOOP: begin
        illegal = w0[15:10] != '0 || w0[31:16] == '0 || w2[31:16] != '0 || w2[15:0] == '0;
      end
      tpu_isa_pkg::OP_DMA_COPY: begin
        illegal   = (w0 & 32'hFFFF_0000) != '0 || w3 != '0 || w0[11:10] == 2'd3;
        link_down = w0[11:10] != tpu_isa_pkg::LINK_LOCAL && !link_up_i[w0[11]];
      end
      tpu_isa_pkg::OP_MXU_LDW, tpu_isa_pkg::OP_MXU_MM: begin
        if (w0[7:0] == tpu_isa_pkg::OP_MXU_LDW) begin
          illegal   = w0[31:9] != '0 || w3 != '0;        // w0[8]: transposed tile
          rows      = N;
          too_many  = tiles_q != '0;                    // one tile may wait for its MXU.MM
        end else begin
          // w0[23:16]: acc_stride - 1 (output row t to ACC row acc_row + t acc_stride)
          illegal  = w0[31:24] != '0 || w0[15:9] != '0 || w3[15:0] == '0;
          rows     = {16'd0, w3[15:0]};
          acc_row  = {16'd0, w3[31:16]};
          no_tiles = tiles_q == '0;
          acc_bad  = acc_row + (rows - 32'd1) * (32'(w0[23:16]) + 32'd1) + 32'd1 > AccRows;
          acc_bad_row = (acc_row >= AccRows) ? acc_row : AccRows;
        end
        // rows at w1 + t * w2 (w2 signed), each 2N bytes, 2N-aligned, inside the UB
        first = {32'd0, w1};
        last  = {32'd0, w1} + {{32{w2[31]}}, w2} * {32'd0, rows - 32'd1};
        span  = 64'(2 * N);
        ub_bad = (w1 % (2 * N)) != 0 || (rows > 1 && (w2 % (2 * N)) != 0) ||
                 first + span > 64'(UbBytes) || last[63] || last + span > 64'(UbBytes);
      end
      tpu_isa_pkg::OP_VPU_LD, tpu_isa_pkg::OP_VPU_ST: begin
        if (w0[7:0] == tpu_isa_pkg::OP_VPU_LD) illegal = (w0 & 32'hFFF0_FC00) != '0;
        else                      illegal = (w0 & 32'hFF0F_FC00) != '0;
        illegal = illegal || w0[9:8] == 2'd3 || w2 != '0 || w3 != '0;
        if (w0[9:8] == tpu_isa_pkg::KIND_ACC) begin
          acc_bad     = w1 >= AccRows;
          acc_bad_row = w1;
        end else begin
          span   = (w0[9:8] == tpu_isa_pkg::KIND_UB_F32) ? 64'(4 * N) : 64'(2 * N);
          ub_bad = ({32'd0, w1} % span) != 0 || {32'd0, w1} + span > 64'(UbBytes);
        end
      end
      tpu_isa_pkg::OP_VPU_OP: begin
        f = w0[15:8];
        illegal = f >= tpu_isa_pkg::VF_COUNT || w2 != '0 || w3 != '0;
        if (f == tpu_isa_pkg::VF_SEL || f == tpu_isa_pkg::VF_ADDMAX) begin
          illegal = illegal || w1 != '0;                 // va, vb, vc
        end else if (f == tpu_isa_pkg::VF_BCAST) begin
          illegal = illegal || w0[31:24] != '0 || w1 >= N;
        end else if (f == tpu_isa_pkg::VF_SELEQ || f == tpu_isa_pkg::VF_SELNE ||
                     f == tpu_isa_pkg::VF_SELLT) begin
          // va, vb, vc and any imm: nothing more to check
        end else if (f == tpu_isa_pkg::VF_BFX) begin
          illegal = illegal || w0[31:24] != '0 || w1[31:10] != '0;
        end else if (f == tpu_isa_pkg::VF_SHLOR) begin
          illegal = illegal || w0[31:28] != '0 || w1[31:5] != '0;
        end else if (f == tpu_isa_pkg::VF_SELEQH) begin
          illegal = illegal || w1[31:16] != '0;          // a bf16 immediate
        end else if (f == tpu_isa_pkg::VF_MAX4 || f == tpu_isa_pkg::VF_ARGMAX4) begin
          illegal = illegal || w1[31:4] != '0;           // imm names the fourth register
        end else if (f == tpu_isa_pkg::VF_SQRT || f == tpu_isa_pkg::VF_I2F || f == tpu_isa_pkg::VF_F2I || f == tpu_isa_pkg::VF_F2BF ||
                     f == tpu_isa_pkg::VF_RSUM || f == tpu_isa_pkg::VF_RMAX) begin
          illegal = illegal || w0[31:24] != '0 || w1 != '0;
        end else begin
          illegal = illegal || w0[31:28] != '0 || w1 != '0;
        end
      end
      tpu_isa_pkg::OP_VPU_LI: begin
        illegal = (w0 & 32'hFFF0_FF00) != '0 || w2 != '0 || w3 != '0;
      end
      default: illegal = 1'b1;                           // unknown, or ICI (reserved)
    endcase
    // The queue an instruction goes to: WAIT/SIGNAL name it; DMA, MXU, VPU opcodes are 0x2*,
    // 0x3*, 0x4*; control instructions (0x0*) go to none.
    unique case (w0[7:4])
      4'h1:    begin to_unit = 1'b1; target = w0[9:8];                  end
      4'h2:    begin to_unit = 1'b1; target = tpu_isa_pkg::UNIT_DMA;    end
      4'h3:    begin to_unit = 1'b1; target = tpu_isa_pkg::UNIT_MXU;    end
      4'h4:    begin to_unit = 1'b1; target = tpu_isa_pkg::UNIT_VPU;    end
      default: begin to_unit = 1'b0; target = 2'd0;                     end
    endcase
  end

  // What decode does this cycle.
  logic dec_fault, dec_go, dec_halt;
  logic [3:0]  dec_code;
  logic [31:0] dec_addr, dec_info;
  always_comb begin
    dec_fault = 1'b0;
    dec_code  = tpu_isa_pkg::FAULT_NONE;
    dec_addr  = '0;
    dec_info  = '0;
    if (ins_err) begin
      dec_fault = 1'b1;
      dec_code  = tpu_isa_pkg::FAULT_FETCH_RANGE;
    end else if (illegal) begin
      dec_fault = 1'b1;
      dec_code  = tpu_isa_pkg::FAULT_ILLEGAL_INSTRUCTION;
      dec_info  = w0;
    end else if (ub_bad) begin
      dec_fault = 1'b1;
      dec_code  = tpu_isa_pkg::FAULT_UB_RANGE;
      dec_addr  = w1;
    end else if (acc_bad) begin
      dec_fault = 1'b1;
      dec_code  = tpu_isa_pkg::FAULT_ACC_RANGE;
      dec_addr  = acc_bad_row;
    end else if (no_tiles) begin
      dec_fault = 1'b1;
      dec_code  = tpu_isa_pkg::FAULT_MXU_NO_WEIGHTS;
    end else if (too_many) begin
      dec_fault = 1'b1;
      dec_code  = tpu_isa_pkg::FAULT_MXU_TILES;
    end else if (deadlock) begin
      dec_fault = 1'b1;
      dec_code  = tpu_isa_pkg::FAULT_SYNC_DEADLOCK;
      dec_info  = {28'd0, w0[15:12]};
    end else if (link_down) begin
      dec_fault = 1'b1;
      dec_code  = tpu_isa_pkg::FAULT_LINK_DOWN;
      dec_info  = {30'd0, w0[11:10]};
    end
    dec_halt = w0[7:0] == tpu_isa_pkg::OP_HALT;
    // Decoded (leaves the fetch buffer) this cycle:
    dec_go = ins_valid && !dec_fault &&
             (to_unit ? !q_full[target] :
              (w0[7:0] == tpu_isa_pkg::OP_FENCE || dec_halt) ? all_quiet : 1'b1);
  end
  assign instr_retired_o = dec_go;
  // The body's last instruction decoded with iterations to go: decode starts over at its first.
  logic loop_again;
  assign loop_again = dec_go && loop_q && loop_pos_q == loop_len_q - LenW'(1) &&
                      loop_iter_q != loop_count_q - 16'd1;

  // ---------------------------------------------------------------- unit queues and heads
  logic [Units*QDepth*EntW-1:0] q_q;
  logic [Units*QW-1:0]          q_wp_q, q_rp_q;
  logic [Units-1:0]             head_pop, head_hand;
  // The head of each queue (what a unit sees must not depend on its ready), per unit on
  // constant slices of the outputs (a loop wrote computed slices: a wide insert per unit a cycle
  // in the verilated model).
  for (genvar u = 0; u < Units; u++) begin : g_head
    logic [EntW-1:0] e;
    // (an empty queue's head is zero: a simulator selects no entry for an idle unit)
    assign e = q_empty[u] ? '0 : q_q[EntW*(QDepth*u + 32'(q_rp_q[QW*u +: QW])) +: EntW];
    assign unit_instr_o[128*u +: 128] = e[127:0];
    assign unit_pc_o[32*u +: 32]      = e[159:128];
  end
  always_comb begin
    head_pop     = '0;
    head_hand    = '0;
    rsig_valid_o = 1'b0;
    rsig_link_o  = unit_instr_o[10 +: 2];               // only the DMA signals remotely
    rsig_sc_o    = unit_instr_o[12 +: 4];
    for (int u = 0; u < Units; u++) begin
      logic [7:0]  opc;
      logic [3:0]  sc;
      logic [1:0]  where;
      logic [31:0] value;
      opc   = unit_instr_o[128*u +: 8];
      where = unit_instr_o[128*u + 10 +: 2];
      sc    = unit_instr_o[128*u + 12 +: 4];
      value = unit_instr_o[128*u + 32 +: 32];
      unit_valid_o[u] = 1'b0;
      unit_stall_o[u] = 1'b0;
      if (!q_empty[u] && state_q == RunS) begin
        if (opc == tpu_isa_pkg::OP_WAIT) begin
          head_pop[u]     = (where[0] ? rc_q[32*sc +: 32] : sc_q[32*sc +: 32]) >= value;
          unit_stall_o[u] = !head_pop[u];
        end else if (opc == tpu_isa_pkg::OP_SIGNAL && where != tpu_isa_pkg::LINK_LOCAL) begin
          // after every earlier copy's last flit: then the signal flit follows them
          rsig_valid_o    = unit_idle_i[u];
          head_pop[u]     = unit_idle_i[u] && rsig_ready_i;
          unit_stall_o[u] = !head_pop[u];
        end else if (opc == tpu_isa_pkg::OP_SIGNAL) begin
          // SIGNAL ..., reads (w0 bit 16): once the unit has read its operands (docs/isa.md)
          head_pop[u]     = unit_instr_o[128*u + 16] ? unit_rd_idle_i[u] : unit_idle_i[u];
        end else begin
          unit_valid_o[u] = 1'b1;
          head_hand[u]    = unit_ready_i[u];
          head_pop[u]     = unit_ready_i[u];
          unit_stall_o[u] = !unit_ready_i[u];
        end
      end
    end
  end
  // Two units may SIGNAL different counters in one cycle, or the same counter: count them.
  // Per unit, then per counter, on constant slices (loops wrote computed slices: a wide insert
  // per counter a cycle in the verilated model); the counters change only on a SIGNAL.
  logic [Units-1:0] sig_local;                           // unit u's head SIGNALs locally now
  logic [16*32-1:0] sc_next;                             // the counters after this cycle
  for (genvar u = 0; u < Units; u++) begin : g_sig
    assign sig_local[u] = head_pop[u] && unit_instr_o[128*u +: 8] == tpu_isa_pkg::OP_SIGNAL &&
                          unit_instr_o[128*u + 10 +: 2] == tpu_isa_pkg::LINK_LOCAL;
  end
  for (genvar c = 0; c < 16; c++) begin : g_sc
    logic [1:0] add;                                     // SIGNALs to counter c now
    always_comb begin
      add = '0;
      if (sig_local != '0) begin
        for (int u = 0; u < Units; u++) begin
          if (sig_local[u] && unit_instr_o[128*u + 12 +: 4] == 4'(c)) add = add + 2'd1;
        end
      end
    end
    assign sc_next[32*c +: 32] = sc_q[32*c +: 32] + 32'(add);
  end

  // ---------------------------------------------------------------- faults
  logic          unit_fault_any;
  logic [1:0]    unit_fault_sel;
  always_comb begin
    unit_fault_any = 1'b0;
    unit_fault_sel = '0;
    for (int u = Units - 1; u >= 0; u--) begin
      if (unit_fault_i[u]) begin
        unit_fault_any = 1'b1;
        unit_fault_sel = 2'(u);
      end
    end
  end
  logic fault_now;
  assign fault_now = state_q == RunS && (unit_fault_any || (ins_valid && dec_fault));

  // ---------------------------------------------------------------- state
  // The PC decode is at (or waits for): the program address at start, then each decoded + 16.
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) pc_o <= '0;
    else if (start_i && state_q != RunS && state_q != DrainS) pc_o <= prog_addr_i;
    else if (loop_again) pc_o <= loop_pc_q;
    else if (dec_go) pc_o <= ins_pc + 32'd16;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      state_q      <= IdleS;
      fetch_addr_q <= '0;
      fb_cnt_q     <= '0;
      fb_wp_q      <= '0;
      fb_rp_q      <= '0;
      fb_err_q     <= '0;
      fly_q        <= '0;
      skip_q       <= 1'b0;
      fetching_q   <= 1'b0;
      next_pc_q    <= '0;
      loop_q       <= 1'b0;
      loop_iter_q  <= '0;
      loop_count_q <= '0;
      loop_len_q   <= '0;
      loop_pos_q   <= '0;
      loop_rp_q    <= '0;
      loop_pc_q    <= '0;
      q_cnt_q      <= '0;
      q_wp_q       <= '0;
      q_rp_q       <= '0;
      tiles_q      <= '0;
      fault_code_o <= tpu_isa_pkg::FAULT_NONE;
      fault_pc_o   <= '0;
      fault_addr_o <= '0;
      fault_info_o <= '0;
      irq_code_o   <= '0;
      sc_q         <= '0;
      rc_q         <= '0;
      sig_disp_q   <= '0;
      sc_owned_q   <= '0;
      sc_owner_q   <= '0;
    end else begin
      // fetch requests and responses (responses after a stop are dropped)
      if (fetch_req_valid_o && fetch_req_ready_i) fetch_addr_q <= fetch_addr_q + 32'd32;
      fly_q <= fly_q + (FW+1)'(fetch_req_valid_o && fetch_req_ready_i) -
               (FW+1)'(fetch_rd_valid_i);
      begin
        logic [FW:0]   cnt;
        logic [FW-1:0] wp;
        cnt = fb_cnt_q - (FW+1)'(dec_go) + (loop_again ? (FW+1)'(loop_len_q) : '0);
        wp  = fb_wp_q;
        if (fetch_rd_valid_i && fetching_q) begin
          for (int h = 0; h < 2; h++) begin
            if (!(h == 0 && skip_q)) begin
              fb_err_q[wp] <= fetch_rd_err_i;
              wp  = wp + FW'(1);
              cnt = cnt + (FW+1)'(1);
            end
          end
          skip_q    <= 1'b0;
          next_pc_q <= next_pc_q + 32'd32;
        end
        fb_wp_q  <= wp;
        fb_cnt_q <= cnt;
      end
      if (loop_again) fb_rp_q <= loop_rp_q;
      else if (dec_go) fb_rp_q <= fb_rp_q + FW'(1);
      // REPEAT: a body starts after it; each iteration's last instruction starts the next
      if (dec_go && w0[7:0] == tpu_isa_pkg::OP_REPEAT) begin
        loop_q       <= 1'b1;
        loop_iter_q  <= '0;
        loop_count_q <= w1[15:0];
        loop_len_q   <= LenW'(w2);
        loop_pos_q   <= '0;
        loop_rp_q    <= fb_rp_q + FW'(1);
        loop_pc_q    <= ins_pc + 32'd16;
      end else if (dec_go && loop_q) begin
        if (loop_pos_q != loop_len_q - LenW'(1)) begin
          loop_pos_q <= loop_pos_q + LenW'(1);
        end else begin
          loop_pos_q  <= '0;
          loop_iter_q <= loop_again ? loop_iter_q + 16'd1 : '0;
          loop_q      <= loop_again;
        end
      end

      // unit queues
      for (int u = 0; u < Units; u++) begin
        logic push;
        push = dec_go && to_unit && target == 2'(u);
        if (push) q_wp_q[QW*u +: QW] <= q_wp_q[QW*u +: QW] + QW'(1);
        if (head_pop[u]) q_rp_q[QW*u +: QW] <= q_rp_q[QW*u +: QW] + QW'(1);
        q_cnt_q[(QW+1)*u +: QW+1] <= q_cnt_q[(QW+1)*u +: QW+1] + (QW+1)'(push) -
                                     (QW+1)'(head_pop[u]);
      end
      if (sig_local != '0) sc_q <= sc_next;
      if (rc_inc_i) rc_q[32*rc_sc_i +: 32] <= rc_q[32*rc_sc_i +: 32] + 32'd1;
      if (dec_go && w0[7:0] == tpu_isa_pkg::OP_SIGNAL && w0[11:10] == tpu_isa_pkg::LINK_LOCAL) begin
        sig_disp_q[32*w0[15:12] +: 32] <= sig_disp_q[32*w0[15:12] +: 32] + 32'd1;
        sc_owned_q[w0[15:12]]          <= 1'b1;
        sc_owner_q[2*w0[15:12] +: 2]   <= w0[9:8];
      end
      if (dec_go && w0[7:0] == tpu_isa_pkg::OP_MXU_LDW) tiles_q <= tiles_q + 16'd1;
      if (dec_go && w0[7:0] == tpu_isa_pkg::OP_MXU_MM)  tiles_q <= tiles_q - 16'd1;
      if (dec_go && w0[7:0] == tpu_isa_pkg::OP_IRQ) irq_code_o <= w1;

      unique case (state_q)
        IdleS, HaltedS, FaultedS: begin
          if (start_i && prog_addr_i[3:0] != '0) begin
            // a program address that is not a multiple of 16 cannot be fetched
            state_q      <= DrainS;
            fetching_q   <= 1'b0;
            fault_code_o <= tpu_isa_pkg::FAULT_FETCH_RANGE;
            fault_pc_o   <= prog_addr_i;
            fault_addr_o <= '0;
            fault_info_o <= '0;
            q_cnt_q      <= '0;
            fb_cnt_q     <= '0;
          end else if (start_i) begin
            state_q      <= RunS;
            fetch_addr_q <= {prog_addr_i[31:4], 4'd0};
            next_pc_q    <= {prog_addr_i[31:5], 5'd0};
            skip_q       <= prog_addr_i[4];
            fetching_q   <= 1'b1;
            fb_cnt_q     <= '0;
            fb_wp_q      <= '0;
            fb_rp_q      <= '0;
            loop_q       <= 1'b0;
            loop_iter_q  <= '0;
            loop_pos_q   <= '0;
            q_cnt_q      <= '0;
            q_wp_q       <= '0;
            q_rp_q       <= '0;
            tiles_q      <= '0;
            fault_code_o <= tpu_isa_pkg::FAULT_NONE;
            fault_pc_o   <= '0;
            fault_addr_o <= '0;
            fault_info_o <= '0;
            sc_q         <= '0;
            rc_q         <= '0;
            sig_disp_q   <= '0;
            sc_owned_q   <= '0;
          end
        end
        RunS: begin
          if (fault_now) begin
            state_q    <= DrainS;
            fetching_q <= 1'b0;
            q_cnt_q    <= '0;                           // queued work is dropped
            q_rp_q     <= q_wp_q;
            fb_cnt_q   <= '0;
            loop_q     <= 1'b0;
            loop_iter_q <= '0;
            loop_pos_q <= '0;
            if (unit_fault_any) begin
              fault_code_o <= unit_fault_code_i[4*unit_fault_sel +: 4];
              fault_pc_o   <= unit_fault_pc_i[32*unit_fault_sel +: 32];
              fault_addr_o <= unit_fault_addr_i[32*unit_fault_sel +: 32];
              fault_info_o <= unit_fault_info_i[32*unit_fault_sel +: 32];
            end else begin
              fault_code_o <= dec_code;
              fault_pc_o   <= ins_pc;
              fault_addr_o <= dec_addr;
              fault_info_o <= dec_info;
            end
          end else if (dec_go && dec_halt) begin
            state_q    <= DrainS;
            fetching_q <= 1'b0;
            fb_cnt_q   <= '0;
          end
        end
        DrainS: begin
          // fetches still in flight come back and are dropped, the links send what is queued
          // (so that no flit of this program is still queued when the next doorbell comes; an
          // empty queue means sent, not arrived: the wire and the neighbour's receive buffer
          // may still hold some); then report
          if (drained) begin
            state_q <= (fault_code_o != tpu_isa_pkg::FAULT_NONE) ? FaultedS : HaltedS;
          end
        end
        default: state_q <= IdleS;
      endcase
    end
  end

  // Fetch buffer and queue storage (not reset: read only where the counts say).
  always_ff @(posedge clk_i) begin
    if (fetch_rd_valid_i && fetching_q) begin
      logic [FW-1:0] wp;
      logic [31:0]   pc;
      wp = fb_wp_q;
      pc = next_pc_q;
      for (int h = 0; h < 2; h++) begin
        if (!(h == 0 && skip_q)) begin
          fb_q[EntW*wp +: EntW] <= {pc, fetch_rd_data_i[128*h +: 128]};
          wp = wp + FW'(1);
        end
        pc = pc + 32'd16;
      end
    end
    for (int u = 0; u < Units; u++) begin
      if (dec_go && to_unit && target == 2'(u)) begin
        q_q[EntW*(QDepth*u + 32'(q_wp_q[QW*u +: QW])) +: EntW] <= {ins_pc, ins};
      end
    end
    // A body entry decoded in a loop steps its field for the next iteration (an adder instead
    // of an iteration x step multiply on the decode path; the entry is held, never a fetch
    // target, and after the last iteration it is freed).
    if (dec_go && loop_q && stepped) fb_q[EntW*fb_rp_q + 32 +: 32] <= raw[63:32] + raw[95:64];
  end

  assign status_o      = (state_q == RunS || state_q == DrainS) ? tpu_isa_pkg::STATUS_RUNNING :
                         (state_q == HaltedS) ? tpu_isa_pkg::STATUS_HALTED :
                         (state_q == FaultedS) ? tpu_isa_pkg::STATUS_FAULTED : tpu_isa_pkg::STATUS_IDLE;
  assign abort_o       = state_q == DrainS && fault_code_o != tpu_isa_pkg::FAULT_NONE;
  assign done_o        = state_q == DrainS && fault_code_o == tpu_isa_pkg::FAULT_NONE && drained;
  assign fault_event_o = state_q == DrainS && fault_code_o != tpu_isa_pkg::FAULT_NONE && drained;
  assign irq_user_o    = dec_go && w0[7:0] == tpu_isa_pkg::OP_IRQ;
  assign running_o     = state_q == RunS || state_q == DrainS;
  // Busy: the unit takes an instruction this cycle or has one in progress (a unit that completes
  // each instruction in the cycle it takes it, like the VPU's lane ops, is never "not idle").
  assign unit_busy_o   = ~unit_idle_i | (unit_valid_o & unit_ready_i);
  assign unused_qw     = '0;

  // What each unit is doing, for the host's watchdog (CSR UNIT_STATE): instructions queued, the
  // unit busy, its queue head a WAIT whose counter is not reached, its head refused by the unit.
  always_comb begin
    for (int u = 0; u < Units; u++) begin
      unit_state_o[4*u +: 4] = {unit_valid_o[u] && !unit_ready_i[u],
                                unit_stall_o[u] && !unit_valid_o[u], unit_busy_o[u], !q_empty[u]};
    end
  end

  `TPU_ASSERT(FetchBufferNeverOverflows,
              {1'b0, fb_cnt_q} + (FW+2)'(loop_pos_q) <= (FW+2)'(FetchDepth))
  // The fetch buffer holds a whole REPEAT body and room to fetch on (elaboration-time check).
  if (FetchDepth < 2 * MaxLen) begin : g_fetch_depth_too_small
    $error("tpu_seq: FetchDepth %0d < 2 x REPEAT_MAX_LEN %0d", FetchDepth, MaxLen);
  end
  `TPU_ASSERT(HandOnlyWhenValid, head_hand == (unit_valid_o & unit_ready_i))
endmodule
