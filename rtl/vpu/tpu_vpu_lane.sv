// tpu_vpu_lane: one lane of the vector unit's element-wise operations (tpu_vpu_pkg::lane_op, the
// function tpu_vpu applies to every lane), purely combinational: the verification top through
// which the VPU's arithmetic meets 10^6 random vectors per funct and `tessera fpu-check --op mul`.
module tpu_vpu_lane (
  input  logic [7:0]  funct_i,                  // tpu_isa_pkg::VF_* (element-wise functs)
  input  logic [31:0] a_i,                      // va lane (IEEE binary32 or int32 bits)
  input  logic [31:0] b_i,                      // vb lane
  input  logic [31:0] c_i,                      // vc lane (sel's mask)
  input  logic [31:0] x_i,                      // the lane of the register imm[3:0] names (max4)
  input  logic [31:0] imm_i,                    // the instruction's imm (w1)
  output logic [31:0] r_o                       // vd lane
);
  assign r_o = tpu_vpu_pkg::lane_op(funct_i, a_i, b_i, c_i, x_i, imm_i);
endmodule
