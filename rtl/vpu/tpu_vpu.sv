// tpu_vpu: the vector unit (docs/isa.md, "VPU"): N fp32 lanes, sixteen vector registers, one
// instruction at a time in program order. VPU.LI and VPU.OP (all functs but div and sqrt,
// reductions included: a combinational pairwise tree) write their register the cycle after
// they are taken; div and sqrt run in N tpu_fp_divsqrt units side by side, DivLatency cycles
// (fixed, data-independent), in the background: the unit goes on taking instructions that
// neither read nor write the divide's destination register (a scoreboard of one entry; another
// div or sqrt waits for the unit), and the result reaches an instruction taken in the cycle it
// is ready through a bypass. VPU.LD/VPU.ST use the unified-buffer port (one request of 4N bytes
// for fp32, 2N bytes for bf16, in the low bytes of the data bus) or the accumulator port (one
// row); each holds its request until granted, and a load writes its register when the data
// returns. A load or store asks for its memory in the cycle it is taken (a store granted at
// once is done in that cycle); while a load waits for its data the unit holds, and in the
// cycle the data returns it already takes the next instruction, which sees the loaded value
// through a bypass: in program order, at up to one instruction a cycle (docs/architecture.md,
// VPU latencies). All range and field checks happen in the sequencer's decode, so the unit
// never faults. idle_o: nothing taken is still in progress. clear_i (the doorbell) zeroes the
// registers: nothing carries over from one program to the next (contract 4).
`include "tpu_assert.svh"

module tpu_vpu #(
  parameter int unsigned N       = 16,              // lanes (power of two)
  parameter int unsigned UbBytes = 262144,
  parameter int unsigned AccRows = 1024,
  localparam int unsigned UbAddrW  = $clog2(UbBytes),
  localparam int unsigned AccAddrW = $clog2(AccRows),
  localparam int unsigned W        = 32 * N         // one vector
) (
  input  logic                clk_i,
  input  logic                rst_ni,
  input  logic                clear_i,            // program start: every register to zero
  // instructions (from the sequencer)
  input  logic                instr_valid_i,
  output logic                instr_ready_o,
  input  logic [127:0]        instr_i,
  output logic                idle_o,
  // unified buffer: byte address, 4N bytes (wide) or 2N bytes
  output logic                ub_req_o,
  input  logic                ub_gnt_i,           // the access happens this cycle
  output logic                ub_we_o,
  output logic                ub_wide_o,          // 1: 4N bytes (fp32), 0: 2N bytes (bf16)
  output logic [UbAddrW-1:0]  ub_addr_o,
  output logic [W-1:0]        ub_wdata_o,         // bf16 stores: 2N bytes in bits [16N-1:0]
  input  logic                ub_rvalid_i,        // read data of the granted read
  input  logic [W-1:0]        ub_rdata_i,
  // accumulator memory: read and write one row
  output logic                acc_rd_valid_o,
  input  logic                acc_rd_ready_i,
  output logic [AccAddrW-1:0] acc_rd_addr_o,
  input  logic                acc_rd_data_valid_i,
  input  logic [W-1:0]        acc_rd_data_i,
  output logic                acc_wr_valid_o,
  input  logic                acc_wr_ready_i,
  output logic [AccAddrW-1:0] acc_wr_addr_o,
  output logic [W-1:0]        acc_wr_data_o
);
  localparam int unsigned Levels = $clog2(N);

  typedef enum logic [1:0] {IdleS, MemS, WaitDataS} state_e;
  state_e state_q;

  logic [16*W-1:0] vreg_q;                        // register r at [W*r +: W]
  logic [127:0]    ins_q;                         // the instruction in progress
  logic [W-1:0]    va, vb, vc, vx;                // its operands (vx: max4's v[imm])
  logic [7:0]      opc, funct;
  logic [3:0]      vd, ra, rb, rc;
  logic [31:0]     imm;

  // The load waiting for its data (WaitDataS): the instruction in ins_q.
  logic [3:0]   pend_vd;
  logic [1:0]   pend_kind;
  logic         pend_to_acc;
  logic [W-1:0] ld_data;
  logic         ld_valid;                         // its data is here this cycle
  assign pend_vd     = ins_q[19:16];
  assign pend_kind   = ins_q[9:8];
  assign pend_to_acc = pend_kind == tpu_isa_pkg::KIND_ACC;
  always_comb begin
    ld_valid = state_q == WaitDataS && (pend_to_acc ? acc_rd_data_valid_i : ub_rvalid_i);
    ld_data  = pend_to_acc ? acc_rd_data_i : ub_rdata_i;
    if (!pend_to_acc && pend_kind == tpu_isa_pkg::KIND_UB_BF16) begin
      for (int l = 0; l < N; l++) ld_data[32*l +: 32] = tpu_fp_pkg::bf16_to_fp32(ub_rdata_i[16*l +: 16]);
    end
  end

  // free: an instruction can be taken this cycle (idle, or the pending load completes now).
  // Decode of the instruction being taken (free) or in progress.
  logic free;
  assign free = state_q == IdleS || ld_valid;
  logic [127:0] ins;
  assign ins   = free ? instr_i : ins_q;
  assign opc   = ins[7:0];
  assign funct = ins[15:8];
  assign vd    = ins[19:16];
  assign ra    = ins[23:20];
  assign rb    = ins[27:24];
  assign rc    = ins[31:28];
  assign imm   = ins[63:32];
  // Operands, with the load that completes this cycle bypassed to the instruction taken in it.
  // The divide in flight (dv_busy_q): its destination register, written when dv_valid.
  logic       dv_busy_q;
  logic [3:0] dv_vd_q;
  logic              dv_ready, dv_valid;
  logic [W-1:0]      dv_res;
  logic dv_done;                                  // the divide's result is here this cycle
  assign dv_done = dv_busy_q && dv_valid;
  function automatic logic [W-1:0] operand(input logic [3:0] r);
    if (ld_valid && r == pend_vd) operand = ld_data;
    else if (dv_done && r == dv_vd_q) operand = dv_res;
    else operand = vreg_q[W*r +: W];
  endfunction
  assign va    = operand(ra);
  assign vb    = operand(rb);
  assign vc    = operand(rc);
  // max4 and argmax4 read a fourth register, named by imm[3:0] (isolated otherwise: the mux
  // then selects nothing, and a simulator moves no vector for the other instructions)
  logic reads_x;
  assign reads_x = opc == tpu_isa_pkg::OP_VPU_OP &&
                   (funct == tpu_isa_pkg::VF_MAX4 || funct == tpu_isa_pkg::VF_ARGMAX4);
  assign vx    = reads_x ? operand(imm[3:0]) : '0;

  // ---------------------------------------------------------------- one-cycle lane operations
  logic [W-1:0] op_res;
  logic [32*(2*N-1)-1:0] tree;                    // reduction tree: leaves 0..N-1, then levels
  logic div_op;                                   // the instruction is div or sqrt
  assign div_op = opc == tpu_isa_pkg::OP_VPU_OP &&
                  (funct == tpu_isa_pkg::VF_DIV || funct == tpu_isa_pkg::VF_SQRT);
  // The result is used only when an element-wise instruction (VPU.OP, not div or sqrt) is
  // taken, and the reduction tree only by rsum / rmax: outside those the lanes compute nothing,
  // so an idle or loading VPU costs a simulator next to nothing (the hardware is the same: the
  // result is only latched under the same conditions).
  logic take;                                     // an instruction is taken this cycle
  logic lane_op_now, tree_now;
  assign lane_op_now = take && opc == tpu_isa_pkg::OP_VPU_OP && !div_op;
  assign tree_now    = lane_op_now &&
                       (funct == tpu_isa_pkg::VF_RSUM || funct == tpu_isa_pkg::VF_RMAX);
  always_comb begin
    logic is_max;
    is_max = funct == tpu_isa_pkg::VF_RMAX;
    // Pairwise tree: node N + j combines nodes 2j and 2j + 1 (leaves are the lanes), so level
    // 1 is (0,1), (2,3), ..., and the root is node 2N - 2.
    tree = '0;
    if (tree_now) begin
      for (int l = 0; l < N; l++) tree[32*l +: 32] = va[32*l +: 32];
      for (int j = 0; j < N - 1; j++) begin
        tree[32*(N + j) +: 32] = is_max ?
            tpu_vpu_pkg::fp32_max(tree[32*(2*j) +: 32], tree[32*(2*j + 1) +: 32]) :
            tpu_fp_pkg::fp32_add(tree[32*(2*j) +: 32], tree[32*(2*j + 1) +: 32]);
      end
    end
    op_res = '0;
    if (lane_op_now) begin
      for (int l = 0; l < N; l++) begin
        unique case (funct)
          tpu_isa_pkg::VF_RSUM,
          tpu_isa_pkg::VF_RMAX:  op_res[32*l +: 32] = tree[32*(2*N - 2) +: 32];
          tpu_isa_pkg::VF_BCAST: op_res[32*l +: 32] = va[32*imm[Levels-1:0] +: 32];
          default: op_res[32*l +: 32] = tpu_vpu_pkg::lane_op(funct, va[32*l +: 32],
                                                             vb[32*l +: 32], vc[32*l +: 32],
                                                             vx[32*l +: 32], imm);
        endcase
      end
    end
  end

  // ---------------------------------------------------------------- divide and square root
  // The N lanes' divide / square-root units, one per lane, started together: one module with
  // a shared control and a rolled per-lane datapath (tpu_fp_divsqrt, Lanes = N).
  logic              dv_start;
  assign dv_start = take && div_op;
  tpu_fp_divsqrt #(.Lanes(N)) u_divsqrt (
    .clk_i    (clk_i),
    .rst_ni   (rst_ni),
    .start_i  (dv_start),
    .op_i     (funct == tpu_isa_pkg::VF_SQRT),
    .a_i      (va),
    .b_i      (vb),
    .ready_o  (dv_ready),
    .valid_o  (dv_valid),
    .result_o (dv_res)
  );

  // ---------------------------------------------------------------- memory requests
  logic is_ld, is_st, to_acc;
  logic [1:0] kind;
  assign is_ld  = opc == tpu_isa_pkg::OP_VPU_LD;
  assign is_st  = opc == tpu_isa_pkg::OP_VPU_ST;
  assign kind   = ins[9:8];
  assign to_acc = kind == tpu_isa_pkg::KIND_ACC;

  logic [W-1:0] st_data;                          // store data: fp32 lanes, or bf16 packed
  always_comb begin
    st_data = va;                                 // VPU.ST's vs is the va field
    if (kind == tpu_isa_pkg::KIND_UB_BF16) begin
      st_data = '0;
      for (int l = 0; l < N; l++) st_data[16*l +: 16] = tpu_fp_pkg::fp32_to_bf16(va[32*l +: 32]);
    end
  end

  // The memory request: the instruction in MemS, or a load/store in the cycle it is taken.
  logic mem_phase;
  assign take      = free && instr_valid_i && instr_ready_o;
  assign mem_phase = state_q == MemS || (take && (is_ld || is_st));
  assign ub_req_o       = mem_phase && !to_acc;
  assign ub_we_o        = is_st;
  assign ub_wide_o      = kind == tpu_isa_pkg::KIND_UB_F32;
  assign ub_addr_o      = UbAddrW'(imm);
  assign ub_wdata_o     = st_data;
  assign acc_rd_valid_o = mem_phase && to_acc && is_ld;
  assign acc_rd_addr_o  = AccAddrW'(imm);
  assign acc_wr_valid_o = mem_phase && to_acc && is_st;
  assign acc_wr_addr_o  = AccAddrW'(imm);
  assign acc_wr_data_o  = va;

  logic mem_done, mem_read_granted;
  assign mem_read_granted = mem_phase && is_ld && (to_acc ? acc_rd_ready_i : ub_gnt_i);
  assign mem_done         = mem_phase && is_st && (to_acc ? acc_wr_ready_i : ub_gnt_i);

  // ---------------------------------------------------------------- sequencing
  // The scoreboard: an instruction that reads or writes the register a divide in flight will
  // write waits until the result is here (then it reads it through the bypass, or its own
  // write, later in program order, wins).
  logic dv_hazard;
  always_comb begin
    unique case (opc)
      tpu_isa_pkg::OP_VPU_LD,
      tpu_isa_pkg::OP_VPU_LI: dv_hazard = vd == dv_vd_q;
      tpu_isa_pkg::OP_VPU_ST: dv_hazard = ra == dv_vd_q;
      default:                dv_hazard = vd == dv_vd_q || ra == dv_vd_q || rb == dv_vd_q ||
                                          rc == dv_vd_q || (reads_x && imm[3:0] == dv_vd_q);
    endcase
  end
  assign instr_ready_o = free && !(dv_busy_q && !dv_valid && dv_hazard) && (!div_op || dv_ready);
  assign idle_o        = state_q == IdleS && !dv_busy_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      state_q   <= IdleS;
      ins_q     <= '0;
      vreg_q    <= '0;
      dv_busy_q <= 1'b0;
      dv_vd_q   <= '0;
    end else if (clear_i) begin
      state_q   <= IdleS;
      vreg_q    <= '0;
      dv_busy_q <= 1'b0;
    end else begin
      // The divide's result, then the pending load's register (they never name the same one:
      // the scoreboard holds a load of the divide's register), then the instruction taken in
      // this cycle, which comes later in program order, so its write wins when it names either.
      if (dv_done) begin
        vreg_q[W*dv_vd_q +: W] <= dv_res;
        dv_busy_q <= 1'b0;
      end
      if (ld_valid) begin
        vreg_q[W*pend_vd +: W] <= ld_data;
        state_q <= IdleS;
      end
      if (take) begin
        ins_q <= instr_i;
        if (opc == tpu_isa_pkg::OP_VPU_LI) begin
          vreg_q[W*vd +: W] <= {N{imm}};
        end else if (opc == tpu_isa_pkg::OP_VPU_OP && !div_op) begin
          vreg_q[W*vd +: W] <= op_res;
        end else if (div_op) begin
          dv_busy_q <= 1'b1;
          dv_vd_q   <= vd;
        end else if (is_ld) begin
          state_q <= mem_read_granted ? WaitDataS : MemS;
        end else if (is_st) begin
          state_q <= mem_done ? IdleS : MemS;
        end
      end else begin
        unique case (state_q)
          MemS: begin
            if (mem_done) state_q <= IdleS;
            if (mem_read_granted) state_q <= WaitDataS;
          end
          default: ;
        endcase
      end
    end
  end

  logic unused_ins;
  assign unused_ins = ^{ins[127:64]};

  `TPU_ASSERT(MemoryRequestsOnlyForAMemoryInstruction,
              !(ub_req_o || acc_rd_valid_o || acc_wr_valid_o) || state_q == MemS || take)
endmodule
