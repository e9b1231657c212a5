// tpu_vpu_pkg: the vector unit's per-lane operations that are not plain arithmetic (that lives
// in tpu_fp_pkg): IEEE comparisons, min/max with the ISA's NaN and signed-zero rules, and the
// int32 <-> fp32 conversions (docs/isa.md, VPU.OP). Word-level combinational functions, one
// exit each (Yosys 0.23 reads no `return`).
package tpu_vpu_pkg;

  function automatic logic is_nan(input logic [30:0] mag);  // the sign does not matter
    is_nan = mag[30:23] == 8'hFF && mag[22:0] != '0;
  endfunction

  // a < b in IEEE order for non-NaN operands (-0 = +0): by sign and magnitude.
  function automatic logic ordered_lt(input logic [31:0] a, input logic [31:0] b);
    logic a_zero, b_zero;
    a_zero = a[30:0] == '0;
    b_zero = b[30:0] == '0;
    if (a_zero && b_zero)    ordered_lt = 1'b0;
    else if (a[31] != b[31]) ordered_lt = a[31];                    // negative < positive
    else if (!a[31])         ordered_lt = a[30:0] < b[30:0];
    else                     ordered_lt = a[30:0] > b[30:0];
  endfunction

  function automatic logic fp32_eq(input logic [31:0] a, input logic [31:0] b);
    fp32_eq = !is_nan(a[30:0]) && !is_nan(b[30:0]) && (a == b || (a[30:0] == '0 && b[30:0] == '0));
  endfunction

  function automatic logic fp32_lt(input logic [31:0] a, input logic [31:0] b);
    fp32_lt = !is_nan(a[30:0]) && !is_nan(b[30:0]) && ordered_lt(a, b);
  endfunction

  function automatic logic fp32_le(input logic [31:0] a, input logic [31:0] b);
    fp32_le = fp32_lt(a, b) || fp32_eq(a, b);
  endfunction

  // min / max: NaN if either is NaN (canonical); min(-0, +0) = -0, max(-0, +0) = +0.
  function automatic logic [31:0] fp32_min(input logic [31:0] a, input logic [31:0] b);
    if (is_nan(a[30:0]) || is_nan(b[30:0]))                   fp32_min = tpu_pkg::FP32_CANON_NAN;
    else if (a[30:0] == '0 && b[30:0] == '0)      fp32_min = a | b;        // -0 if either is
    else                                          fp32_min = ordered_lt(b, a) ? b : a;
  endfunction

  function automatic logic [31:0] fp32_max(input logic [31:0] a, input logic [31:0] b);
    if (is_nan(a[30:0]) || is_nan(b[30:0]))                   fp32_max = tpu_pkg::FP32_CANON_NAN;
    else if (a[30:0] == '0 && b[30:0] == '0)      fp32_max = a & b;        // +0 if either is
    else                                          fp32_max = ordered_lt(a, b) ? b : a;
  endfunction
  // The max of four (max4, and argmax4's reference value): funct 6's rules, any grouping.
  function automatic logic [31:0] fp32_max4(input logic [31:0] a, input logic [31:0] b,
                                            input logic [31:0] c, input logic [31:0] x);
    fp32_max4 = fp32_max(fp32_max(fp32_max(a, b), c), x);
  endfunction

  // int32 -> fp32, round to nearest even (exact below 2^24).
  function automatic logic [31:0] i2f(input logic [31:0] x);
    logic        s, g, st, up;
    logic [31:0] mag, norm;
    logic [4:0]  lz;
    logic [7:0]  e;
    s    = x[31];
    mag  = s ? (~x + 32'd1) : x;                  // 0x80000000 stays (|INT32_MIN| = 2^31)
    lz   = tpu_fp_pkg::lzc32(mag);
    norm = mag << lz;                             // leading one at bit 31 (none for zero)
    g    = norm[7];
    st   = norm[6:0] != '0;
    up   = g && (st || norm[8]);
    e    = 8'd158 - 8'(lz);                       // 127 + 31 - lz
    // Rounding up carries from the fraction into the exponent by itself: {e, fraction} + 1.
    if (!norm[31]) i2f = '0;
    else           i2f = {s, {e, norm[30:8]} + 31'(up)};
  endfunction

  // fp32 -> int32 toward zero; NaN -> 0; beyond the range -> INT32_MIN / INT32_MAX.
  function automatic logic [31:0] f2i(input logic [31:0] a);
    logic [7:0]  e;
    logic [31:0] mag, sig;
    e   = a[30:23];
    sig = {8'd0, 1'b1, a[22:0]};                  // |a| * 2^(150 - e)
    mag = (e >= 8'd150) ? (sig << (e - 8'd150)) : (sig >> (8'd150 - e));  // for e in 127..157
    if (is_nan(a[30:0]))             f2i = '0;
    else if (e < 8'd127)       f2i = '0;                                   // |a| < 1
    else if (e >= 8'd158)      f2i = a[31] ? 32'h8000_0000 : 32'h7FFF_FFFF; // |a| >= 2^31
    else                       f2i = a[31] ? (~mag + 32'd1) : mag;
  endfunction

  // One lane of every element-wise VPU.OP funct (docs/isa.md): the vector unit applies it to
  // each lane, and tpu_vpu_lane exposes it for verification. div and sqrt (tpu_fp_divsqrt) and
  // the cross-lane functs (rsum, rmax, bcast) are not here; they return 0.
  function automatic logic [31:0] lane_op(input logic [7:0] funct, input logic [31:0] a,
                                          input logic [31:0] b, input logic [31:0] c,
                                          input logic [31:0] x, input logic [31:0] imm);
    logic [31:0] m4;                              // argmax4's max (x: the register imm names)
    m4 = '0;
    unique case (funct)
      tpu_isa_pkg::VF_ADD:   lane_op = tpu_fp_pkg::fp32_add(a, b);
      tpu_isa_pkg::VF_SUB:   lane_op = tpu_fp_pkg::fp32_add(a, {~b[31], b[30:0]});
      tpu_isa_pkg::VF_MUL:   lane_op = tpu_fp_pkg::fp32_mul(a, b);
      tpu_isa_pkg::VF_MIN:   lane_op = fp32_min(a, b);
      tpu_isa_pkg::VF_MAX:   lane_op = fp32_max(a, b);
      tpu_isa_pkg::VF_CMPEQ: lane_op = {32{fp32_eq(a, b)}};
      tpu_isa_pkg::VF_CMPLT: lane_op = {32{fp32_lt(a, b)}};
      tpu_isa_pkg::VF_CMPLE: lane_op = {32{fp32_le(a, b)}};
      tpu_isa_pkg::VF_SEL:   lane_op = (c != '0) ? a : b;
      tpu_isa_pkg::VF_I2F:   lane_op = i2f(a);
      tpu_isa_pkg::VF_F2I:   lane_op = f2i(a);
      tpu_isa_pkg::VF_F2BF:  lane_op = {tpu_fp_pkg::fp32_to_bf16(a), 16'd0};
      tpu_isa_pkg::VF_IADD:  lane_op = a + b;
      tpu_isa_pkg::VF_IAND:  lane_op = a & b;
      tpu_isa_pkg::VF_IOR:   lane_op = a | b;
      tpu_isa_pkg::VF_IXOR:  lane_op = a ^ b;
      tpu_isa_pkg::VF_SHL:   lane_op = a << b[4:0];
      tpu_isa_pkg::VF_SHR:   lane_op = a >> b[4:0];
      tpu_isa_pkg::VF_SRA:   lane_op = $signed(a) >>> b[4:0];
      tpu_isa_pkg::VF_SELEQ: lane_op = fp32_eq(a, b) ? c : imm;
      tpu_isa_pkg::VF_SELNE: lane_op = fp32_eq(a, b) ? imm : c;
      tpu_isa_pkg::VF_SELLT: lane_op = fp32_lt(a, b) ? c : imm;
      tpu_isa_pkg::VF_BFX:   lane_op = (a >> imm[4:0]) & (32'hFFFF_FFFF >> (5'd31 - imm[9:5]));
      tpu_isa_pkg::VF_SHLOR: lane_op = a | (b << imm[4:0]);
      tpu_isa_pkg::VF_SELEQH: lane_op = {(a[31:16] == b[31:16]) ? c[31:16] : imm[15:0],
                                         (a[15:0] == b[15:0]) ? c[15:0] : imm[15:0]};
      tpu_isa_pkg::VF_ADDMAX: lane_op = fp32_max(tpu_fp_pkg::fp32_add(a, b), c);
      tpu_isa_pkg::VF_MAX4:   lane_op = fp32_max4(a, b, c, x);
      tpu_isa_pkg::VF_ARGMAX4: begin                // 0.0, 1.0, 2.0 or 3.0
        m4      = fp32_max4(a, b, c, x);
        lane_op = fp32_eq(a, m4) ? 32'h0000_0000 : fp32_eq(b, m4) ? 32'h3F80_0000 :
                  fp32_eq(c, m4) ? 32'h4000_0000 : 32'h4040_0000;
      end
      default:               lane_op = '0;
    endcase
  endfunction

endpackage
