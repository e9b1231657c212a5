// tpu_fp_pkg: the IEEE-754 arithmetic every Tessera datapath uses, written as word-level
// combinational functions so a block can instance them once (a module) or inside a rolled loop
// (the MXU array). Rounding is round-to-nearest-even, subnormal inputs and outputs are kept,
// every NaN result is the canonical 0x7FC00000 and signed zeros follow IEEE-754 (RNE: an exact
// zero difference is +0). docs/numerics.md states the contract these functions implement.
// Written in the subset Yosys 0.23 reads (make synth): one exit per function (no `return`),
// no `import` inside a package.
//
// Simulation flavour: verilated with +define+TPU_SIM_HOST_ARITH, fp32_add, bf16_mul, fp32_mul and
// mac call the host's IEEE arithmetic instead (sim/host_arith.h, through $c): the same results bit
// for bit (tests/rtl/test_host_arith.cc), the same registers and cycles around them, a fraction of
// the simulation cost. The word-level bodies below are the design; synthesis, lint and the
// reference models never see the define.
package tpu_fp_pkg;

  // Leading zeros of a 32-bit word by binary search: five compare-and-shift steps, no loop,
  // so Verilator emits straight-line code. Returns 31 for zero (callers never pass zero).
  function automatic logic [4:0] lzc32(input logic [31:0] x);
    logic [4:0] n;
    logic [31:0] v;
    n = 5'd0;
    v = x;
    if (v[31:16] == 16'd0) begin n = n + 5'd16; v = v << 16; end
    if (v[31:24] == 8'd0)  begin n = n + 5'd8;  v = v << 8;  end
    if (v[31:28] == 4'd0)  begin n = n + 5'd4;  v = v << 4;  end
    if (v[31:30] == 2'd0)  begin n = n + 5'd2;  v = v << 2;  end
    if (v[31] == 1'b0)     begin n = n + 5'd1;  end
    lzc32 = n;
  endfunction

  function automatic logic fp32_is_nan(input logic [30:0] mag);  // sign does not matter
    fp32_is_nan = (mag[30:23] == 8'hFF) && (mag[22:0] != 23'd0);
  endfunction

  function automatic logic fp32_is_inf(input logic [30:0] mag);
    fp32_is_inf = (mag[30:23] == 8'hFF) && (mag[22:0] == 23'd0);
  endfunction

  // fp32 + fp32. The larger magnitude operand x keeps its exponent; the smaller y is aligned
  // with guard, round and sticky bits, which is enough for correct RNE (Goldberg 1991).
  // Written as branches whose logic feeds only their own result (infinities and NaNs, a carry
  // out, no cancellation, cancellation with its leading-zero count): the same multiplexed
  // datapath in synthesis, while a simulator evaluates only the branch taken
  // (docs/performance.md, "Simulation speed of the chip").
  function automatic tpu_pkg::fp32_t fp32_add(input tpu_pkg::fp32_t a, input tpu_pkg::fp32_t b);
`ifdef TPU_SIM_HOST_ARITH
    fp32_add = $c32("tpu_host_fp32_add(", a, ",", b, ")");
`else
    logic           swap, eff_sub, sticky, round_up;
    tpu_pkg::fp32_t x, y, xchg, res;
    logic [7:0]     ex, ey, align, shamt;
    logic [26:0]    sig_x, sig_y, sig_y_al, norm;  // {hidden, fraction[22:0], guard, round, sticky}
    logic [27:0]    sum;                           // one carry bit above sig_x
    logic [4:0]     lz;
    logic [8:0]     exp_res;
    logic [30:0]    rounded;
    if (a[30:23] == 8'hFF || b[30:23] == 8'hFF) begin
      if (fp32_is_nan(a[30:0]) || fp32_is_nan(b[30:0]) ||
          (fp32_is_inf(a[30:0]) && fp32_is_inf(b[30:0]) && (a[31] != b[31]))) begin
        res = tpu_pkg::FP32_CANON_NAN;
      end else if (fp32_is_inf(a[30:0])) begin
        res = a;
      end else begin
        res = b;
      end
    end else begin
      swap  = b[30:0] > a[30:0];
      // x = swap ? b : a and y the other, as a masked exchange: a 2:1 mux per bit either way,
      // but the simulator runs it without a data-dependent branch (it mispredicted a third of
      // the time).
      xchg  = {32{swap}} & (a ^ b);
      x     = a ^ xchg;
      y     = b ^ xchg;
      // Subnormals carry exponent 1 and no hidden bit.
      ex    = (x[30:23] == 8'd0) ? 8'd1 : x[30:23];
      ey    = (y[30:23] == 8'd0) ? 8'd1 : y[30:23];
      sig_x = {x[30:23] != 8'd0, x[22:0], 3'b000};
      sig_y = {y[30:23] != 8'd0, y[22:0], 3'b000};
      align = ex - ey;
      if (align >= 8'd27) begin
        sig_y_al = {26'd0, sig_y != 27'd0};
      end else begin
        sticky   = (sig_y & ((27'd1 << align) - 27'd1)) != 27'd0;
        sig_y_al = sig_y >> align;
        sig_y_al[0] = sig_y_al[0] | sticky;
      end
      eff_sub = x[31] ^ y[31];
      sum = eff_sub ? ({1'b0, sig_x} - {1'b0, sig_y_al}) : ({1'b0, sig_x} + {1'b0, sig_y_al});
      if (sum[27:26] != 2'b00) begin
        // A carry out (shift right one, the dropped bit into sticky) or already normalised:
        // one shifter selected by sum[27] instead of two branches (data-dependent, so the
        // simulator mispredicted them).
        norm    = 27'(sum >> sum[27]) | {26'd0, sum[27] & sum[0]};
        exp_res = {1'b0, ex} + {8'd0, sum[27]};
      end else begin
        lz      = lzc32({sum[26:0], 5'd0});
        // Never shift below exponent 1: the result then stays subnormal (hidden bit 0).
        shamt   = ({3'd0, lz} > (ex - 8'd1)) ? (ex - 8'd1) : {3'd0, lz};
        norm    = sum[26:0] << shamt;
        exp_res = {1'b0, ex - shamt};
      end
      // The hidden bit adds one to the exponent field, so (exp - 1) + {hidden, fraction} packs
      // normals and subnormals alike; a rounding carry ripples into the exponent (and to inf).
      round_up = norm[2] & (norm[1] | norm[0] | norm[3]);
      rounded  = {exp_res[7:0] - 8'd1, 23'd0} + {7'd0, norm[26:3]} + {30'd0, round_up};
      if (sum == 28'd0) begin
        // Exact zero: +0 for a difference (RNE), otherwise the common sign (-0 + -0 = -0).
        res = {eff_sub ? 1'b0 : x[31], 31'd0};
      end else if (exp_res >= 9'd255) begin
        res = {x[31], 8'hFF, 23'd0};
      end else begin
        res = {x[31], rounded};
      end
    end
    fp32_add = res;
`endif
  endfunction

  // bf16 x bf16 -> fp32. The 8x8-bit significand product always fits fp32's 24 bits, so the
  // result is exact unless it overflows (-> inf) or falls below fp32's normal range, where it
  // is shifted into a subnormal and rounded to nearest even. Branches as in fp32_add: special
  // operands, then the finite product (its leading-zero count only for a subnormal operand, its
  // denormalising shift only for a result below the normal range).
  function automatic tpu_pkg::fp32_t bf16_mul(input tpu_pkg::bf16_t a, input tpu_pkg::bf16_t b);
`ifdef TPU_SIM_HOST_ARITH
    bf16_mul = $c32("tpu_host_bf16_mul(", a, ",", b, ")");
`else
    logic               sign, a_nan, b_nan, a_inf, b_inf, a_zero, b_zero, round_up;
    logic [7:0]         sa, sb;
    logic [15:0]        prod, prod_n;
    logic [4:0]         lz;
    logic [9:0]         esum;   // exponent of prod_n + 142 (subnormal operands count 1): > 0
    logic [9:0]         shamt;
    logic [54:0]        wide;   // {significand[22:0] after shift, 32 bits below}
    tpu_pkg::fp32_t     res;
    sign   = a[15] ^ b[15];
    a_zero = a[14:0] == 15'd0;
    b_zero = b[14:0] == 15'd0;
    if (a[14:7] == 8'hFF || b[14:7] == 8'hFF || a_zero || b_zero) begin
      a_nan = (a[14:7] == 8'hFF) && (a[6:0] != 7'd0);
      b_nan = (b[14:7] == 8'hFF) && (b[6:0] != 7'd0);
      a_inf = (a[14:7] == 8'hFF) && (a[6:0] == 7'd0);
      b_inf = (b[14:7] == 8'hFF) && (b[6:0] == 7'd0);
      if (a_nan || b_nan || (a_inf && b_zero) || (a_zero && b_inf)) begin
        res = tpu_pkg::FP32_CANON_NAN;
      end else if (a_inf || b_inf) begin
        res = {sign, 8'hFF, 23'd0};
      end else begin
        res = {sign, 31'd0};
      end
    end else begin
      sa   = {a[14:7] != 8'd0, a[6:0]};
      sb   = {b[14:7] != 8'd0, b[6:0]};
      prod = 16'(sa * sb);
      if (prod[15:14] != 2'b00) begin
        // Normal operands: the product's leading one is at bit 15 or 14 (a shift of 0 or 1,
        // without a data-dependent branch).
        lz = {4'd0, !prod[15]};
        prod_n = prod << !prod[15];
      end else begin
        lz = lzc32({prod, 16'd0});              // a subnormal operand
        prod_n = prod << lz;                      // leading one at bit 15
      end
      // The biased exponent is ea + eb - 126 - lz; with 142 added it stays positive (lz <= 15).
      esum = {2'd0, (a[14:7] == 8'd0) ? 8'd1 : a[14:7]} +
             {2'd0, (b[14:7] == 8'd0) ? 8'd1 : b[14:7]} + 10'd16 - {5'd0, lz};
      if (esum >= 10'd397) begin                 // exponent >= 255: overflow
        res = {sign, 8'hFF, 23'd0};
      end else if (esum >= 10'd143) begin        // exponent >= 1: exact
        res = {sign, 8'(esum - 10'd142), prod_n[14:0], 8'd0};
      end else if (esum <= 10'd117) begin        // a shift of 26 or more: +-0
        res = {sign, 31'd0};
      end else begin
        // Below the normal range: shift the 24-bit significand right by 1 - exponent and round.
        shamt    = 10'd143 - esum;
        wide     = 55'({prod_n, 8'd0, 32'd0} >> shamt);  // bit 55 is always shifted out
        round_up = wide[31] & ((wide[30:0] != 31'd0) | wide[32]);
        res = {sign, 31'({8'd0, wide[54:32]}) + {30'd0, round_up}};
      end
    end
    bf16_mul = res;
`endif
  endfunction

  // fp32 x fp32. Both significands are normalised first (a subnormal's leading one moved to
  // bit 23, its exponent lowered to match), so the 48-bit product has its leading one at bit 47
  // or 46. In range the top 24 bits are the significand, the next the guard, the rest the
  // sticky. Below 2^-126 the whole product is shifted right by 1 - exp into a 74-bit window
  // whose 26 low zero bits catch every shifted-out bit (a shift of 26 or more leaves under a
  // quarter ulp of the smallest subnormal: +-0), so guard and sticky are exact and the result
  // is rounded once.
  function automatic tpu_pkg::fp32_t fp32_mul(input tpu_pkg::fp32_t a, input tpu_pkg::fp32_t b);
`ifdef TPU_SIM_HOST_ARITH
    fp32_mul = $c32("tpu_host_fp32_mul(", a, ",", b, ")");
`else
    logic               sign, a_nan, b_nan, a_inf, b_inf, a_zero, b_zero, round_up;
    logic [4:0]         lza, lzb;
    logic [23:0]        sa, sb;
    logic [47:0]        prod, prod_n;
    logic signed [10:0] exp_res;
    logic [7:0]         exp_eff;  // 1 for a subnormal result
    logic [10:0]        shamt;
    logic [73:0]        wide;   // {significand[23:0], guard, 49 sticky bits}
    logic [30:0]        rounded;
    tpu_pkg::fp32_t     res;
    sign    = a[31] ^ b[31];
    a_nan   = fp32_is_nan(a[30:0]);
    b_nan   = fp32_is_nan(b[30:0]);
    a_inf   = fp32_is_inf(a[30:0]);
    b_inf   = fp32_is_inf(b[30:0]);
    a_zero  = a[30:0] == 31'd0;
    b_zero  = b[30:0] == 31'd0;
    lza     = lzc32({a[30:23] != 8'd0, a[22:0], 8'd0});
    lzb     = lzc32({b[30:23] != 8'd0, b[22:0], 8'd0});
    sa      = {a[30:23] != 8'd0, a[22:0]} << lza;  // leading one at bit 23
    sb      = {b[30:23] != 8'd0, b[22:0]} << lzb;
    prod    = 48'(sa * sb);
    prod_n  = prod[47] ? prod : {prod[46:0], 1'b0};
    // Biased exponent of prod_n read as 1.f (one integer bit): a subnormal counts as exponent 1.
    exp_res = $signed({3'd0, (a[30:23] == 8'd0) ? 8'd1 : a[30:23]}) - $signed({6'd0, lza}) +
              $signed({3'd0, (b[30:23] == 8'd0) ? 8'd1 : b[30:23]}) - $signed({6'd0, lzb}) -
              11'sd127 + $signed({10'd0, prod[47]});
    if (exp_res >= 11'sd1) begin
      shamt   = 11'd0;
      exp_eff = exp_res[7:0];  // >= 255 is overflow, handled below
    end else begin
      shamt   = (11'sd1 - exp_res > 11'sd26) ? 11'd26 : 11'(11'sd1 - exp_res);
      exp_eff = 8'd1;
    end
    wide     = {prod_n, 26'd0} >> shamt;
    round_up = wide[49] & ((wide[48:0] != 49'd0) | wide[50]);
    // (exp - 1) << 23 plus {hidden, fraction}: the hidden bit restores the exponent, a subnormal
    // (hidden 0, exp_eff 1) packs with exponent field 0, and a rounding carry ripples upward.
    rounded  = {exp_eff - 8'd1, 23'd0} + {7'd0, wide[73:50]} + {30'd0, round_up};
    if (a_nan || b_nan || (a_inf && b_zero) || (a_zero && b_inf)) begin
      res = tpu_pkg::FP32_CANON_NAN;
    end else if (a_inf || b_inf || (exp_res >= 11'sd255)) begin
      res = {sign, 8'hFF, 23'd0};
    end else if (a_zero || b_zero) begin
      res = {sign, 31'd0};
    end else begin
      res = {sign, rounded};  // a carry out of 0x7F7FFFFF lands exactly on inf
    end
    fp32_mul = res;
`endif
  endfunction

  // fp32 -> bf16, round to nearest even; NaN -> canonical bf16 NaN; overflow rounds to inf.
  function automatic tpu_pkg::bf16_t fp32_to_bf16(input tpu_pkg::fp32_t a);
    tpu_pkg::bf16_t rounded;
    rounded      = 16'((a + 32'h0000_7FFF + {31'd0, a[16]}) >> 16);
    fp32_to_bf16 = fp32_is_nan(a[30:0]) ? tpu_pkg::BF16_CANON_NAN : rounded;
  endfunction

  // bf16 -> fp32 is exact; NaN -> canonical fp32 NaN.
  function automatic tpu_pkg::fp32_t bf16_to_fp32(input tpu_pkg::bf16_t a);
    bf16_to_fp32 = ((a[14:7] == 8'hFF) && (a[6:0] != 7'd0)) ? tpu_pkg::FP32_CANON_NAN : {a, 16'd0};
  endfunction

  // One processing-element step: psum + a * w, the product rounded first (it is exact in
  // range), then the sum. Two roundings, never fused: the architectural MAC.
  // A zero operand takes a short path with the same result (operand gating, as a real PE gates
  // its multiplier and adder on a zero input to save power): a zero times a finite value is an
  // exact signed zero z, and psum + z is psum for every psum other than a zero (the sum of two
  // zeros: -0 only when both are -0, RNE) or a NaN (the canonical NaN). In the verilated model
  // this skips both functions for the MACs the data makes trivial — padded weight rows and
  // columns, zero pixels, relu and max-pool zeros, pipeline bubbles (docs/performance.md,
  // "Simulation speed of the chip").
  function automatic tpu_pkg::fp32_t mac(input tpu_pkg::fp32_t psum, input tpu_pkg::bf16_t act,
                                         input tpu_pkg::bf16_t weight);
`ifdef TPU_SIM_HOST_ARITH
    mac = $c32("tpu_host_mac(", psum, ",", act, ",", weight, ")");
`else
    logic           zero_prod;  // the product is an exact signed zero
    tpu_pkg::fp32_t prod, sum, res;
    // (a == 0 || w == 0) && neither is inf or NaN (a zero is neither), tested in two steps so
    // that the usual case, no zero operand, costs the simulator one comparison.
    zero_prod = 1'b0;
    if ((act[14:0] == 15'd0) || (weight[14:0] == 15'd0)) begin
      zero_prod = (act[14:7] != 8'hFF) && (weight[14:7] != 8'hFF);
    end
    // Two statements in the long branch: Verilator turns an if/else of single assignments
    // into a ?: and would then evaluate both functions every time.
    if (zero_prod) begin
      // psum, but a zero psum keeps its sign only when the product's is the same (-0 + -0)
      // and a NaN becomes the canonical one: masks rather than branches (whether a column's
      // sum is still zero depends on the data; the simulator mispredicted it).
      res = psum & {~(psum[30:0] == 31'd0) | (act[15] ^ weight[15]), 31'h7FFF_FFFF};
      res = fp32_is_nan(psum[30:0]) ? tpu_pkg::FP32_CANON_NAN : res;
    end else begin
      prod = bf16_mul(act, weight);
      // (+-0) + x = x for every x other than a zero (NaN products are already canonical):
      // the top row's partial sum is always +0.
      if ((psum[30:0] == 31'd0) && (prod[30:0] != 31'd0)) begin
        res = prod;
      end else begin
        sum = fp32_add(psum, prod);
        res = sum;
      end
    end
    mac = res;
`endif
  endfunction

endpackage
