// tpu_fp_divsqrt: IEEE-754 binary32 divide and square root, one operation at a time, by radix-2
// restoring digit recurrence with four quotient (root) bits per cycle. The latency is FIXED for
// every input, specials included (contract 3: timing is data-independent): start_i accepted in
// cycle t (ready_o high) -> set-up edge (operands normalised and registered) -> 7 recurrence
// cycles (28 bits: 1 integer, 23 fraction, guard, three more) -> rounding edge; valid_o is high
// for exactly one cycle, cycle t + 9, and ready_o is high again in that same cycle, so the next
// operation may start there: one result every 9 cycles back to back. Rounding is
// round-to-nearest-even from the guard bit and a sticky bit (lower quotient bits | remainder
// != 0); subnormal inputs are normalised first; quotients below 2^-126 are shifted right once,
// with every shifted-out bit in the sticky, before the single rounding. x / 0 = +-inf (not a
// fault), 0 / 0 = inf / inf = NaN, x / inf = +-0, sqrt(-0) = -0, sqrt(negative) = NaN,
// sqrt(+inf) = +inf; every NaN result is the canonical 0x7FC00000. docs/numerics.md states the
// contract.
//
// Lanes > 1: that many such units that always start together (the VPU's lanes), sharing one
// control (start, busy, count: the same for every lane by construction), with lane l's
// operands and result at [32*l +: 32]. Simulation form: the lanes' datapath registers are
// unpacked arrays updated in one rolled loop with blocking assignments (as in tpu_mxu_array),
// so the verilated model has one copy of the datapath's code for all lanes instead of one per
// instance (16 copies cost the chip model ~17% of its instruction-cache misses,
// docs/performance.md). Those registers are read by no other process; the results leave
// through result_q, written at the finishing edge and read only while valid_o is high.
`include "tpu_assert.svh"

module tpu_fp_divsqrt #(
  parameter int unsigned Lanes = 1
) (
  input  logic                  clk_i,
  input  logic                  rst_ni,
  // request
  input  logic                  start_i,  // begin an operation (accepted when ready_o)
  input  logic                  op_i,     // 0: a_i / b_i, 1: sqrt(a_i)
  input  logic [32*Lanes-1:0]   a_i,      // dividends or radicands (IEEE binary32 bits)
  input  logic [32*Lanes-1:0]   b_i,      // divisors (ignored by sqrt)
  output logic                  ready_o,  // idle: start_i is accepted this cycle
  // result
  output logic                  valid_o,  // one-cycle pulse, 9 cycles after the start
  output logic [32*Lanes-1:0]   result_o  // the IEEE results (RNE), held until the next ones
);
  // Recurrence cycles, Steps bits each. The latency, start_i accepted in cycle t to valid_o in
  // cycle t + latency, is Iters + 2 = 9 (tests/rtl/test_fp_divsqrt.cc: kLatency, checked for
  // every input class). 28 bits where 26 are needed: the top 26 are the 26-bit quotient
  // exactly (a restoring recurrence produces truncated bits), the last two join the sticky.
  localparam int unsigned Steps = 4;
  localparam int unsigned Iters = 7;

  // The three steps below are functions evaluated inside the clocked block, each only in the
  // cycles it is used (a start, a recurrence cycle, the finish): the same logic as combinational
  // blocks feeding the registers' enables, but a simulator evaluates nothing while the unit is
  // idle (docs/performance.md, "Simulation speed of the chip").
  localparam int unsigned SetupW = 1 + 32 + 11 + 32 + 24 + 52;

  // ---------------------------------------------------------------------------------------------
  // Operand set-up: {special, special result, exponent, remainder, divisor, radicand}
  // ---------------------------------------------------------------------------------------------
  function automatic logic [SetupW-1:0] setup(input logic op, input tpu_pkg::fp32_t a,
                                              input tpu_pkg::fp32_t b);
    logic               a_nan, b_nan, a_inf, b_inf, a_zero, b_zero, a_lt_b;
    logic [4:0]         lza, lzb;
    logic [23:0]        ma, mb;                 // significands, leading one at bit 23
    logic signed [10:0] ea, eb, e_sqrt;         // biased exponents of ma, mb; unbiased a / 2
    logic signed [10:0] exp_start;              // biased exponent of the result's leading bit
    logic               special;
    tpu_pkg::fp32_t     special_res;
    logic [31:0]        rem_start;
    logic [51:0]        rad_start;
    a_nan  = tpu_fp_pkg::fp32_is_nan(a[30:0]);
    b_nan  = tpu_fp_pkg::fp32_is_nan(b[30:0]);
    a_inf  = tpu_fp_pkg::fp32_is_inf(a[30:0]);
    b_inf  = tpu_fp_pkg::fp32_is_inf(b[30:0]);
    a_zero = a[30:0] == 31'd0;
    b_zero = b[30:0] == 31'd0;
    // Normalise: a subnormal's leading one moves to bit 23 and its exponent (1) drops to match.
    lza    = tpu_fp_pkg::lzc32({a[30:23] != 8'd0, a[22:0], 8'd0});
    lzb    = tpu_fp_pkg::lzc32({b[30:23] != 8'd0, b[22:0], 8'd0});
    ma     = {a[30:23] != 8'd0, a[22:0]} << lza;
    mb     = {b[30:23] != 8'd0, b[22:0]} << lzb;
    ea     = $signed({3'd0, (a[30:23] == 8'd0) ? 8'd1 : a[30:23]}) - $signed({6'd0, lza});
    eb     = $signed({3'd0, (b[30:23] == 8'd0) ? 8'd1 : b[30:23]}) - $signed({6'd0, lzb});
    a_lt_b = ma < mb;
    e_sqrt = (ea - 11'sd127) >>> 1;               // floor((ea - 127) / 2)
    if (!op) begin
      // ma / mb lies in (1/2, 2): start from 2 ma when ma < mb, so the quotient is in [1, 2).
      exp_start = ea - eb + 11'sd127 - (a_lt_b ? 11'sd1 : 11'sd0);
      rem_start = a_lt_b ? {7'd0, ma, 1'b0} : {8'd0, ma};
      rad_start = '0;
      special   = a_nan || b_nan || a_inf || b_inf || a_zero || b_zero;
      if (a_nan || b_nan || (a_inf && b_inf) || (a_zero && b_zero)) begin
        special_res = tpu_pkg::FP32_CANON_NAN;
      end else if (a_inf || b_zero) begin
        special_res = {a[31] ^ b[31], 8'hFF, 23'd0};
      end else begin  // 0 / x, x / inf
        special_res = {a[31] ^ b[31], 31'd0};
      end
    end else begin
      // sqrt(ma * 2^e): for even e the radicand is ma, for odd e it is 2 ma, so the root of
      // rad = ma << 27 (or << 28) is a 26-bit integer with its leading one at bit 25.
      exp_start = e_sqrt + 11'sd127;
      rem_start = '0;
      rad_start = (ea[0] == 1'b1) ? {1'b0, ma, 27'd0} : {ma, 28'd0};  // ea odd <=> e even
      special   = a_nan || a_inf || a_zero || a[31];
      if (a_nan || (a[31] && !a_zero)) begin
        special_res = tpu_pkg::FP32_CANON_NAN;
      end else begin  // +-0 -> itself, +inf -> +inf
        special_res = a;
      end
    end
    setup = {special, special_res, exp_start, rem_start, mb, rad_start};
  endfunction

  // ---------------------------------------------------------------------------------------------
  // Recurrence: Steps restoring steps a cycle -> {remainder, radicand, quotient}
  // ---------------------------------------------------------------------------------------------
  function automatic logic [32+52+28-1:0] recur(input logic op, input logic [31:0] rem,
                                                input logic [51:0] rad, input logic [27:0] quo,
                                                input logic [23:0] div);
    logic [31:0] rem_step, rem_sh;
    logic [29:0] trial;
    logic [27:0] quo_step;
    logic [51:0] rad_step;
    logic        bit_q;
    rem_step = rem;
    quo_step = quo;
    rad_step = rad;
    for (int i = 0; i < Steps; i++) begin
      if (op) begin
        // Root digit: bring down two radicand bits; subtract 4q + 1 when it fits.
        rem_sh   = {rem_step[29:0], rad_step[51:50]};
        trial    = {quo_step, 2'b01};
        bit_q    = rem_sh >= {2'd0, trial};
        rem_step = bit_q ? rem_sh - {2'd0, trial} : rem_sh;
        rad_step = {rad_step[49:0], 2'b00};
      end else begin
        // Quotient digit: subtract the divisor when it fits, then double the remainder.
        // The remainder stays below twice the divisor (< 2^25), so the doubling cannot overflow.
        trial    = {6'd0, div};
        bit_q    = rem_step >= {2'd0, trial};
        rem_sh   = bit_q ? rem_step - {2'd0, trial} : rem_step;
        rem_step = {rem_sh[30:0], 1'b0};
      end
      quo_step = {quo_step[26:0], bit_q};
    end
    recur = {rem_step, rad_step, quo_step};
  endfunction

  // ---------------------------------------------------------------------------------------------
  // Rounding: the single RNE rounding, after the subnormal shift
  // ---------------------------------------------------------------------------------------------
  function automatic tpu_pkg::fp32_t round_result(input logic sign, input logic special,
                                                  input tpu_pkg::fp32_t special_res,
                                                  input logic signed [10:0] exp,
                                                  input logic [27:0] quo,
                                                  input logic [31:0] rem);
    logic [10:0]    shamt;
    logic [7:0]     exp_eff;                    // 1 for a subnormal result
    logic [53:0]    wide;                       // {significand[23:0], guard, 29 sticky bits}
    logic           sticky, round_up;
    logic [30:0]    rounded;
    tpu_pkg::fp32_t res;
    if (exp >= 11'sd1) begin
      shamt   = 11'd0;
      exp_eff = exp[7:0];                       // >= 255 is overflow, handled below
    end else begin
      // A shift of 28 leaves the quotient entirely in the sticky (the value is under a quarter
      // of the smallest subnormal from a shift of 26 on): the result is +-0.
      shamt   = (11'sd1 - exp > 11'sd28) ? 11'd28 : 11'(11'sd1 - exp);
      exp_eff = 8'd1;
    end
    wide     = {quo[27:2], 28'd0} >> shamt;
    sticky   = (wide[28:0] != 29'd0) || (quo[1:0] != 2'd0) || (rem != 32'd0);
    round_up = wide[29] & (sticky | wide[30]);
    rounded  = {exp_eff - 8'd1, 23'd0} + {7'd0, wide[53:30]} + {30'd0, round_up};
    if (special) begin
      res = special_res;
    end else if (exp >= 11'sd255) begin
      res = {sign, 8'hFF, 23'd0};
    end else begin
      res = {sign, rounded};                    // a carry out of 0x7F7FFFFF lands on inf
    end
    round_result = res;
  endfunction

  // ---------------------------------------------------------------------------------------------
  // State
  // ---------------------------------------------------------------------------------------------
  logic               busy_q, valid_q;
  logic [3:0]         cnt_q;                    // recurrence cycles done, 0 .. Iters
  logic               op_q;
  // Per lane (datapath registers, no reset: loaded by every accepted start).
  logic               sign_q        [Lanes];
  logic               special_q     [Lanes];
  tpu_pkg::fp32_t     special_res_q [Lanes];
  logic signed [10:0] exp_q         [Lanes];
  logic [31:0]        rem_q         [Lanes];    // partial remainder (a root's < 2^29)
  logic [23:0]        div_q         [Lanes];    // divisor significand
  logic [51:0]        rad_q         [Lanes];    // radicand bits not yet consumed, top first
  logic [27:0]        quo_q         [Lanes];    // quotient / root bits so far
  logic [32*Lanes-1:0] result_q;

  logic               accept, iterate, finish;
  assign accept  = start_i && !busy_q;
  assign iterate = busy_q && (cnt_q != 4'(Iters));
  assign finish  = busy_q && (cnt_q == 4'(Iters));

  // ---------------------------------------------------------------------------------------------
  // Registers
  // ---------------------------------------------------------------------------------------------
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      busy_q   <= 1'b0;
      valid_q  <= 1'b0;
      cnt_q    <= '0;
    end else begin
      valid_q <= finish;
      if (accept) begin
        busy_q <= 1'b1;
        cnt_q  <= '0;
      end else if (iterate) begin
        cnt_q  <= cnt_q + 4'd1;
      end else if (finish) begin
        busy_q <= 1'b0;
      end
    end
  end

  // The datapath: each lane's set-up on a start, its recurrence while iterating, its rounding at
  // the finish (into result_q, which changes only then).
  always_ff @(posedge clk_i) begin
    logic [32*Lanes-1:0] res;                    // (set and read only at the finish)
    if (accept) begin
      op_q <= op_i;
      for (int l = 0; l < Lanes; l++) begin
        sign_q[l] = a_i[32*l + 31] ^ (b_i[32*l + 31] & !op_i);
        {special_q[l], special_res_q[l], exp_q[l], rem_q[l], div_q[l], rad_q[l]} =
            setup(op_i, a_i[32*l +: 32], b_i[32*l +: 32]);
        quo_q[l] = '0;
      end
    end else if (iterate) begin
      for (int l = 0; l < Lanes; l++) begin
        {rem_q[l], rad_q[l], quo_q[l]} = recur(op_q, rem_q[l], rad_q[l], quo_q[l], div_q[l]);
      end
    end else if (finish) begin
      res = '0;
      for (int l = 0; l < Lanes; l++) begin
        res[32*l +: 32] = round_result(sign_q[l], special_q[l], special_res_q[l], exp_q[l],
                                       quo_q[l], rem_q[l]);
      end
      result_q <= res;
    end
  end

  assign ready_o  = !busy_q;
  assign valid_o  = valid_q;
  assign result_o = result_q;

  `TPU_ASSERT_IMPLIES(CountInRange, busy_q, (cnt_q <= 4'(Iters)))
  `TPU_ASSERT_IMPLIES(ValidOnlyWhenIdle, valid_q, !busy_q)
endmodule
