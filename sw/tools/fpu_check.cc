#include "sw/tools/fpu_check.h"

#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "Vtpu_fp_divsqrt.h"
#include "Vtpu_fpu.h"
#include "Vtpu_fpu_host.h"
#include "Vtpu_vpu_lane.h"
#include "harness/sim_ctrl.h"
#include "sw/numerics/fp_ref.h"
#include "tessera/isa_gen.h"

namespace tessera::tools {
namespace {

using fpu_vectors_detail::operand_bits;
using fpu_vectors_detail::operand_count;
using fpu_vectors_detail::result_bits;

// tpu_fp_divsqrt, one operation at a time: start, then wait for valid_o. The unit's latency is
// fixed (9 cycles); a result that does not come within kMaxCycles is an error, not a hang.
class DivSqrtRunner {
 public:
  DivSqrtRunner() {
    sim_->start_i = 0;
    sim_->op_i = 0;
    sim_->a_i = 0;
    sim_->b_i = 0;
    sim_.reset();
  }
  uint32_t run(bool sqrt, uint32_t a, uint32_t b) {
    sim_->start_i = 1;
    sim_->op_i = sqrt;
    sim_->a_i = a;
    sim_->b_i = b;
    sim_.tick();  // accepted: the unit is idle between cases
    sim_->start_i = 0;
    for (int i = 0; i < kMaxCycles && !sim_->valid_o; ++i) sim_.tick();
    if (!sim_->valid_o) {
      throw std::runtime_error("tpu_fp_divsqrt gave no result within " +
                               std::to_string(kMaxCycles) + " cycles");
    }
    return sim_->result_o;
  }

 private:
  static constexpr int kMaxCycles = 100;
  SimCtrl<Vtpu_fp_divsqrt> sim_;
};

bool is_nan(uint32_t v, int bits) {
  return bits == 32 ? fp::is_nan32(v) : fp::is_nan16(static_cast<uint16_t>(v));
}

std::string hex(uint32_t v, int bits) {
  return bits == 32 ? fp::hex32(v) : fp::hex16(static_cast<uint16_t>(v));
}

}  // namespace

std::optional<FpuOp> parse_fpu_op(const std::string& name) {
  if (name == "add") return FpuOp::kAdd;
  if (name == "bf16mul") return FpuOp::kBf16Mul;
  if (name == "f2bf") return FpuOp::kFp32ToBf16;
  if (name == "bf2f") return FpuOp::kBf16ToFp32;
  if (name == "mul") return FpuOp::kMul;
  if (name == "div") return FpuOp::kDiv;
  if (name == "sqrt") return FpuOp::kSqrt;
  return std::nullopt;
}

const char* fpu_op_name(FpuOp op) {
  switch (op) {
    case FpuOp::kAdd:
      return "add";
    case FpuOp::kBf16Mul:
      return "bf16mul";
    case FpuOp::kFp32ToBf16:
      return "f2bf";
    case FpuOp::kBf16ToFp32:
      return "bf2f";
    case FpuOp::kMul:
      return "mul";
    case FpuOp::kDiv:
      return "div";
    case FpuOp::kSqrt:
      return "sqrt";
  }
  return "?";
}

namespace {
// The cases through one build of the arithmetic: Fpu is tpu_fpu verilated as the RTL
// (Vtpu_fpu) or in the host-arithmetic flavour (Vtpu_fpu_host). fp32 x fp32 goes through the
// vector unit's lane in the RTL build; the flavour's lane calls the same tpu_fp_pkg::fp32_mul as
// its tpu_fpu, so there it is tpu_fpu's fmul port. f2bf, bf2f, div and sqrt are the RTL in both
// builds (the flavour replaces only add, bf16 x bf16, fp32 x fp32 and the MAC).
template <class Fpu>
int check_cases(FpuOp op, const std::string& path, const FpuParseResult& parsed, bool lane_mul,
                std::ostream& out, std::ostream& err) {
  CombSim<Fpu> sim;
  Fpu& m = sim.top();
  CombSim<Vtpu_vpu_lane> lane;
  std::optional<DivSqrtRunner> divsqrt;
  if (op == FpuOp::kDiv || op == FpuOp::kSqrt) divsqrt.emplace();
  const int rbits = result_bits(op), obits = operand_bits(op);
  uint64_t mismatches = 0;
  for (const FpuCase& c : parsed.cases) {
    uint32_t got = 0;
    switch (op) {
      case FpuOp::kAdd:
        m.add_a_i = c.a;
        m.add_b_i = c.b;
        sim.eval();
        got = m.add_o;
        break;
      case FpuOp::kBf16Mul:
        m.mul_a_i = c.a;
        m.mul_b_i = c.b;
        sim.eval();
        got = m.mul_o;
        break;
      case FpuOp::kFp32ToBf16:
        m.f2bf_i = c.a;
        sim.eval();
        got = m.f2bf_o;
        break;
      case FpuOp::kBf16ToFp32:
        m.bf2f_i = c.a;
        sim.eval();
        got = m.bf2f_o;
        break;
      case FpuOp::kMul:
        if (lane_mul) {  // through the vector unit's lane (the function every VPU lane runs)
          lane.top().funct_i = static_cast<uint8_t>(isa::VF_MUL);
          lane.top().a_i = c.a;
          lane.top().b_i = c.b;
          lane.top().c_i = 0;
          lane.top().imm_i = 0;
          lane.eval();
          got = lane.top().r_o;
        } else {
          m.fmul_a_i = c.a;
          m.fmul_b_i = c.b;
          sim.eval();
          got = m.fmul_o;
        }
        break;
      case FpuOp::kDiv:
      case FpuOp::kSqrt:
        try {
          got = divsqrt->run(op == FpuOp::kSqrt, c.a, c.b);
        } catch (const std::runtime_error& e) {
          err << "fpu-check: " << path << " line " << c.line << ": " << e.what() << "\n";
          return 2;
        }
        break;
    }
    const bool match = is_nan(c.expected, rbits)
                           ? got == (rbits == 32 ? fp::kFp32CanonicalNan : fp::kBf16CanonicalNan)
                           : got == c.expected;
    if (!match) {
      ++mismatches;
      out << "mismatch line " << c.line << ": " << hex(c.a, obits);
      if (operand_count(op) == 2) out << " " << hex(c.b, obits);
      out << ": expected " << hex(c.expected, rbits) << " got " << hex(got, rbits) << "\n";
    }
  }
  out << "fpu-check " << fpu_op_name(op) << " " << path << ": " << parsed.cases.size() << " cases, "
      << mismatches << " mismatches\n";
  return mismatches == 0 ? 0 : 1;
}
}  // namespace

int run_fpu_check(FpuOp op, const std::string& path, std::ostream& out, std::ostream& err,
                  bool host_arith) {
  std::ifstream in(path);
  if (!in) {
    err << "fpu-check: cannot open '" << path << "'\n";
    return 2;
  }
  const FpuParseResult parsed = parse_fpu_vectors(in, op);
  if (!parsed.errors.empty()) {
    for (const auto& e : parsed.errors) err << path << ": " << e << "\n";
    err << "fpu-check: " << parsed.errors.size() << " malformed line(s) in '" << path
        << "'; no case was run\n";
    return 2;
  }
  if (parsed.cases.empty()) {  // a check of nothing must not pass
    err << "fpu-check: '" << path << "' holds no test case (only blank or comment lines)\n";
    return 2;
  }
  if (host_arith) return check_cases<Vtpu_fpu_host>(op, path, parsed, false, out, err);
  return check_cases<Vtpu_fpu>(op, path, parsed, true, out, err);
}

}  // namespace tessera::tools
