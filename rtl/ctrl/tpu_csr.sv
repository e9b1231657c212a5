// tpu_csr: the chip's control and status registers (docs/isa.md, "CSRs") on a simple 32-bit
// register port: a read returns its data in the same cycle; a write takes effect at the clock
// edge. PROG_ADDR and IRQ_ENABLE are read/write; writing 1 to DOORBELL while no program runs
// pulses start_o (and clears the performance counters); IRQ_PENDING bits are set by the
// sequencer's done, fault and user events and cleared by writing 1s; irq_o = pending & enable.
// STATUS and the FAULT_* registers mirror the sequencer. The performance counters (64 bits,
// low word at PERF_BASE + 8i) count while a program runs: cycles, per-unit busy and stall
// cycles, MACs, HBM bytes read and written, row hits and misses, instructions retired.
module tpu_csr #(
  parameter int unsigned N       = 16,              // MXU size = VPU lanes
  parameter int unsigned UbBytes = 262144,
  parameter int unsigned AccRows = 1024,
  parameter int unsigned QDepth  = 32,
  parameter int unsigned Channels = 1               // HBM pseudo-channels
) (
  input  logic        clk_i,
  input  logic        rst_ni,
  // register port
  input  logic        csr_valid_i,                  // an access this cycle
  input  logic        csr_write_i,                  // 1: write csr_wdata_i
  input  logic [11:0] csr_addr_i,                   // byte offset, 4-byte aligned
  input  logic [31:0] csr_wdata_i,
  output logic [31:0] csr_rdata_o,                  // read data (same cycle)
  // to the sequencer
  output logic        start_o,                      // doorbell pulse
  output logic [31:0] prog_addr_o,
  // from the sequencer
  input  logic [1:0]  status_i,
  input  logic [3:0]  fault_code_i,
  input  logic [31:0] fault_pc_i,
  input  logic [31:0] fault_addr_i,
  input  logic [31:0] fault_info_i,
  input  logic        done_i,                       // events (one-cycle pulses)
  input  logic        fault_event_i,
  input  logic        irq_user_i,
  input  logic [31:0] irq_code_i,
  // activity for the counters
  input  logic        running_i,
  input  logic [2:0]  unit_busy_i,                  // DMA, MXU, VPU
  input  logic [2:0]  unit_stall_i,
  input  logic        mxu_row_i,                    // an activation row entered the array
  input  logic [7:0]  hbm_rd_bursts_i,              // 32-byte bursts read this cycle
  input  logic [7:0]  hbm_wr_bursts_i,              // written
  input  logic [7:0]  col_cmds_i,                   // HBM RD/WR commands this cycle
  input  logic [7:0]  acts_i,                       // HBM ACT commands (row misses)
  input  logic        instr_retired_i,
  input  logic [11:0]  unit_state_i,                // tpu_seq's per-unit state (UNIT_STATE)
  input  logic [31:0]  pc_i,                        // tpu_seq's decode PC (PC)
  // interrupt
  output logic        irq_o
);
  localparam int unsigned Perf = 13;                // counters 0 .. 12 (tpu_isa_pkg PERF_*)

  logic [31:0]          prog_addr_q;
  logic [2:0]           irq_en_q, irq_pend_q;
  logic [32'(Perf)*64-1:0] perf_q;

  // Increments of each counter this cycle.
  logic [32'(Perf)*64-1:0] inc;
  always_comb begin
    inc = '0;
    if (running_i) begin
      inc[64*0 +: 64]  = 64'd1;
      inc[64*1 +: 64]  = 64'(unit_busy_i[0]);
      inc[64*2 +: 64]  = 64'(unit_busy_i[1]);
      inc[64*3 +: 64]  = 64'(unit_busy_i[2]);
      inc[64*4 +: 64]  = 64'(unit_stall_i[0]);
      inc[64*5 +: 64]  = 64'(unit_stall_i[1]);
      inc[64*6 +: 64]  = 64'(unit_stall_i[2]);
    end
    inc[64*7 +: 64]  = mxu_row_i ? 64'(N * N) : 64'd0;
    inc[64*8 +: 64]  = 64'(hbm_rd_bursts_i) * 64'd32;
    inc[64*9 +: 64]  = 64'(hbm_wr_bursts_i) * 64'd32;
    inc[64*10 +: 64] = 64'(col_cmds_i);           // read back as column commands - ACTs
    inc[64*11 +: 64] = 64'(acts_i);
    inc[64*12 +: 64] = 64'(instr_retired_i);
  end

  // Each counter plus this cycle's increment, on constant slices (a loop over the counters wrote
  // computed slices of the 832-bit vector, a wide insert per counter every cycle in the
  // verilated model).
  // The doorbell's clear is applied at the register: the sums then do not depend on the CSR
  // port's inputs, so the simulator does not recompute them whenever those change.
  logic doorbell;
  logic [32'(Perf)*64-1:0] perf_sum;
  for (genvar i = 0; i < Perf; i++) begin : g_perf
    assign perf_sum[64*i +: 64] = perf_q[64*i +: 64] + inc[64*i +: 64];
  end
  assign doorbell = csr_valid_i && csr_write_i && csr_addr_i == tpu_isa_pkg::CSR_DOORBELL &&
                    csr_wdata_i[0] && status_i != tpu_isa_pkg::STATUS_RUNNING;
  assign start_o     = doorbell;
  assign prog_addr_o = prog_addr_q;
  assign irq_o       = (irq_pend_q & irq_en_q) != '0;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      prog_addr_q <= '0;
      irq_en_q    <= '0;
      irq_pend_q  <= '0;
      perf_q      <= '0;
    end else begin
      perf_q <= doorbell ? '0 : perf_sum;
      if (csr_valid_i && csr_write_i) begin
        unique case (csr_addr_i)
          tpu_isa_pkg::CSR_PROG_ADDR:  prog_addr_q <= csr_wdata_i;
          tpu_isa_pkg::CSR_IRQ_ENABLE: irq_en_q    <= csr_wdata_i[2:0];
          default: ;
        endcase
      end
      irq_pend_q <= (irq_pend_q & ~((csr_valid_i && csr_write_i &&
                                     csr_addr_i == tpu_isa_pkg::CSR_IRQ_PENDING) ?
                                    csr_wdata_i[2:0] : 3'd0)) |
                    {irq_user_i, fault_event_i, done_i};
    end
  end

  // Row hits are the column commands that needed no ACT: every ACT opens a row for at least one
  // column command, so hits = column commands - ACTs (never negative once the ACT's column
  // command has issued; clamped at 0 for the cycles in between).
  // Only the row-hit counter is read differently: no copy of all the counters a cycle.
  logic [63:0] row_hits;
  logic [11:0] perf_off;                            // a read's byte offset into the counters
  assign perf_off = 12'(csr_addr_i - tpu_isa_pkg::CSR_PERF_BASE);
  assign row_hits = (perf_q[64*10 +: 64] > perf_q[64*11 +: 64]) ?
                    perf_q[64*10 +: 64] - perf_q[64*11 +: 64] : 64'd0;

  always_comb begin
    csr_rdata_o = '0;
    if (csr_addr_i >= tpu_isa_pkg::CSR_PERF_BASE &&
        csr_addr_i < tpu_isa_pkg::CSR_PERF_BASE + 12'(8 * Perf)) begin
      csr_rdata_o = (perf_off[11:3] == 9'd10) ? (perf_off[2] ? row_hits[63:32] : row_hits[31:0])
                                              : perf_q[32*(32'(perf_off) / 4) +: 32];
    end else begin
      unique case (csr_addr_i)
        tpu_isa_pkg::CSR_ID:          csr_rdata_o = tpu_isa_pkg::CSR_ID_VALUE;
        tpu_isa_pkg::CSR_CONFIG0:     csr_rdata_o = {8'd0, 8'($clog2(Channels)),
                                                     8'($clog2(QDepth)), 8'($clog2(N))};
        tpu_isa_pkg::CSR_CONFIG1:     csr_rdata_o = 32'(UbBytes);
        tpu_isa_pkg::CSR_CONFIG2:     csr_rdata_o = 32'(AccRows);
        tpu_isa_pkg::CSR_PROG_ADDR:   csr_rdata_o = prog_addr_q;
        tpu_isa_pkg::CSR_STATUS:      csr_rdata_o = {30'd0, status_i};
        tpu_isa_pkg::CSR_FAULT_CODE:  csr_rdata_o = {28'd0, fault_code_i};
        tpu_isa_pkg::CSR_FAULT_PC:    csr_rdata_o = fault_pc_i;
        tpu_isa_pkg::CSR_FAULT_ADDR:  csr_rdata_o = fault_addr_i;
        tpu_isa_pkg::CSR_FAULT_INFO:  csr_rdata_o = fault_info_i;
        tpu_isa_pkg::CSR_IRQ_ENABLE:  csr_rdata_o = {29'd0, irq_en_q};
        tpu_isa_pkg::CSR_IRQ_PENDING: csr_rdata_o = {29'd0, irq_pend_q};
        tpu_isa_pkg::CSR_IRQ_CODE:    csr_rdata_o = irq_code_i;
        tpu_isa_pkg::CSR_UNIT_STATE:  csr_rdata_o = {20'd0, unit_state_i};
        tpu_isa_pkg::CSR_PC:          csr_rdata_o = pc_i;
        default:                      csr_rdata_o = '0;
      endcase
    end
  end


endmodule
