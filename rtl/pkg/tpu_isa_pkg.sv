// tpu_isa_pkg: the Tessera instruction set's encodings (docs/isa.md is the specification).
// Instructions are 128 bits, four little-endian 32-bit words w0..w3; w0[7:0] is the opcode.
// This file is the one source of truth for the numbers: CMake generates the C++ header
// (build/generated/tessera/isa_gen.h) from the `localparam` lines below, so keep each constant
// on one line in the form `localparam logic [W-1:0] NAME = W'hVALUE;`.
package tpu_isa_pkg;

  // Opcodes (w0[7:0]).
  localparam logic [7:0] OP_NOP      = 8'h00;
  localparam logic [7:0] OP_HALT     = 8'h01;
  localparam logic [7:0] OP_FENCE    = 8'h02;
  localparam logic [7:0] OP_IRQ      = 8'h03;
  localparam logic [7:0] OP_REPEAT   = 8'h04;  // the next len instructions, count times
  localparam logic [7:0] OP_WAIT     = 8'h10;
  localparam logic [7:0] OP_SIGNAL   = 8'h11;
  localparam logic [7:0] OP_DMA_LOOP = 8'h20;
  localparam logic [7:0] OP_DMA_COPY = 8'h21;
  localparam logic [7:0] OP_MXU_LDW  = 8'h30;
  localparam logic [7:0] OP_MXU_MM   = 8'h31;
  localparam logic [7:0] OP_VPU_LD   = 8'h40;
  localparam logic [7:0] OP_VPU_ST   = 8'h41;
  localparam logic [7:0] OP_VPU_OP   = 8'h42;
  localparam logic [7:0] OP_VPU_LI   = 8'h43;
  localparam logic [7:0] OP_ICI_SEND = 8'h50;  // reserved: illegal until the multi-chip work
  localparam logic [7:0] OP_ICI_RECV = 8'h51;  // reserved

  // REPEAT: the longest body (instructions). The sequencer keeps the body in its fetch buffer,
  // so a chip's fetch buffer holds at least twice this many instructions.
  localparam logic [7:0] REPEAT_MAX_LEN = 8'h20;

  // Units (WAIT / SIGNAL w0[9:8]).
  localparam logic [1:0] UNIT_DMA = 2'h0;
  localparam logic [1:0] UNIT_MXU = 2'h1;
  localparam logic [1:0] UNIT_VPU = 2'h2;

  // Links (DMA.COPY and SIGNAL w0[11:10]): where the destination / the counter is.
  localparam logic [1:0] LINK_LOCAL = 2'h0;
  localparam logic [1:0] LINK_NEXT  = 2'h1;  // the ring neighbour chip + 1
  localparam logic [1:0] LINK_PREV  = 2'h2;  // the ring neighbour chip - 1

  // VPU.LD / VPU.ST kinds (w0[9:8]).
  localparam logic [1:0] KIND_UB_F32  = 2'h0;
  localparam logic [1:0] KIND_UB_BF16 = 2'h1;
  localparam logic [1:0] KIND_ACC     = 2'h2;

  // VPU.OP functs (w0[15:8]).
  localparam logic [7:0] VF_ADD   = 8'h00;
  localparam logic [7:0] VF_SUB   = 8'h01;
  localparam logic [7:0] VF_MUL   = 8'h02;
  localparam logic [7:0] VF_DIV   = 8'h03;
  localparam logic [7:0] VF_SQRT  = 8'h04;
  localparam logic [7:0] VF_MIN   = 8'h05;
  localparam logic [7:0] VF_MAX   = 8'h06;
  localparam logic [7:0] VF_CMPEQ = 8'h07;
  localparam logic [7:0] VF_CMPLT = 8'h08;
  localparam logic [7:0] VF_CMPLE = 8'h09;
  localparam logic [7:0] VF_SEL   = 8'h0A;
  localparam logic [7:0] VF_I2F   = 8'h0B;
  localparam logic [7:0] VF_F2I   = 8'h0C;
  localparam logic [7:0] VF_F2BF  = 8'h0D;
  localparam logic [7:0] VF_IADD  = 8'h0E;
  localparam logic [7:0] VF_IAND  = 8'h0F;
  localparam logic [7:0] VF_IOR   = 8'h10;
  localparam logic [7:0] VF_IXOR  = 8'h11;
  localparam logic [7:0] VF_SHL   = 8'h12;
  localparam logic [7:0] VF_SHR   = 8'h13;
  localparam logic [7:0] VF_SRA   = 8'h14;
  localparam logic [7:0] VF_RSUM  = 8'h15;
  localparam logic [7:0] VF_RMAX  = 8'h16;
  localparam logic [7:0] VF_BCAST = 8'h17;
  // Select with an immediate (vd = cond ? vc : imm) and bit-field functs (docs/isa.md): the
  // epilogues of a convolution's max pool and of its gradient in one instruction a step.
  localparam logic [7:0] VF_SELEQ = 8'h18;     // va = vb ? vc : imm
  localparam logic [7:0] VF_SELNE = 8'h19;     // va = vb ? imm : vc
  localparam logic [7:0] VF_SELLT = 8'h1A;     // va < vb ? vc : imm
  localparam logic [7:0] VF_BFX   = 8'h1B;     // (va >> imm[4:0]) & (2^(imm[9:5] + 1) - 1)
  localparam logic [7:0] VF_SHLOR = 8'h1C;     // va | (vb << imm[4:0])
  // Fused functs of the convolutions' epilogues (docs/isa.md): a select on the two bf16 halves
  // of a lane, two lane operations with the rounding of the two, and a 2x2 window's max and
  // argmax, whose fourth operand is the register imm[3:0] names.
  localparam logic [7:0] VF_SELEQH  = 8'h1D;   // per 16-bit half: va.h = vb.h ? vc.h : imm[15:0]
  localparam logic [7:0] VF_ADDMAX  = 8'h1E;   // max(va + vb, vc)
  localparam logic [7:0] VF_MAX4    = 8'h1F;   // max of va, vb, vc, v[imm]
  localparam logic [7:0] VF_ARGMAX4 = 8'h20;   // first of va, vb, vc equal to that max: 0/1/2, else 3
  localparam logic [7:0] VF_COUNT   = 8'h21;   // functs below this are legal

  // Fault codes (FAULT_CODE CSR).
  localparam logic [3:0] FAULT_NONE                = 4'h0;
  localparam logic [3:0] FAULT_ILLEGAL_INSTRUCTION = 4'h1;
  localparam logic [3:0] FAULT_UB_RANGE            = 4'h2;
  localparam logic [3:0] FAULT_ACC_RANGE           = 4'h3;
  localparam logic [3:0] FAULT_DMA                 = 4'h4;
  localparam logic [3:0] FAULT_SYNC_DEADLOCK       = 4'h5;
  localparam logic [3:0] FAULT_FETCH_RANGE         = 4'h6;
  localparam logic [3:0] FAULT_MXU_NO_WEIGHTS      = 4'h7;
  localparam logic [3:0] FAULT_MXU_TILES           = 4'h8;  // an LDW while a tile is unused
  localparam logic [3:0] FAULT_LINK_DOWN           = 4'h9;  // a remote op on a link not up

  // CSR byte offsets.
  localparam logic [11:0] CSR_ID          = 12'h000;
  localparam logic [11:0] CSR_CONFIG0     = 12'h004;
  localparam logic [11:0] CSR_CONFIG1     = 12'h008;
  localparam logic [11:0] CSR_CONFIG2     = 12'h00C;
  localparam logic [11:0] CSR_PROG_ADDR   = 12'h010;
  localparam logic [11:0] CSR_DOORBELL    = 12'h014;
  localparam logic [11:0] CSR_STATUS      = 12'h018;
  localparam logic [11:0] CSR_FAULT_CODE  = 12'h01C;
  localparam logic [11:0] CSR_FAULT_PC    = 12'h020;
  localparam logic [11:0] CSR_FAULT_ADDR  = 12'h024;
  localparam logic [11:0] CSR_FAULT_INFO  = 12'h028;
  localparam logic [11:0] CSR_IRQ_ENABLE  = 12'h02C;
  localparam logic [11:0] CSR_IRQ_PENDING = 12'h030;
  localparam logic [11:0] CSR_IRQ_CODE    = 12'h034;
  localparam logic [11:0] CSR_UNIT_STATE  = 12'h038;  // per unit: queued, busy, WAIT, blocked
  localparam logic [11:0] CSR_PC          = 12'h03C;  // the next instruction to decode
  localparam logic [11:0] CSR_PERF_BASE   = 12'h040;  // + 8 * counter, low word first
  localparam logic [31:0] CSR_ID_VALUE    = 32'h7E55_0001;

  // STATUS values.
  localparam logic [1:0] STATUS_IDLE    = 2'h0;
  localparam logic [1:0] STATUS_RUNNING = 2'h1;
  localparam logic [1:0] STATUS_HALTED  = 2'h2;
  localparam logic [1:0] STATUS_FAULTED = 2'h3;

  // Performance counters (PERF[i]).
  localparam logic [3:0] PERF_CYCLES      = 4'h0;
  localparam logic [3:0] PERF_DMA_BUSY    = 4'h1;
  localparam logic [3:0] PERF_MXU_BUSY    = 4'h2;
  localparam logic [3:0] PERF_VPU_BUSY    = 4'h3;
  localparam logic [3:0] PERF_DMA_STALL   = 4'h4;
  localparam logic [3:0] PERF_MXU_STALL   = 4'h5;
  localparam logic [3:0] PERF_VPU_STALL   = 4'h6;
  localparam logic [3:0] PERF_MACS        = 4'h7;
  localparam logic [3:0] PERF_HBM_RD      = 4'h8;
  localparam logic [3:0] PERF_HBM_WR      = 4'h9;
  localparam logic [3:0] PERF_ROW_HITS    = 4'hA;
  localparam logic [3:0] PERF_ROW_MISSES  = 4'hB;
  localparam logic [3:0] PERF_INSTRS      = 4'hC;
  localparam logic [3:0] PERF_COUNT       = 4'hD;

endpackage
