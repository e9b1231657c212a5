// The host-arithmetic simulation flavour (+define+TPU_SIM_HOST_ARITH, sim/host_arith.h) against
// the synthesizable RTL it stands in for, bit for bit: the arithmetic functions (tpu_fpu in both
// builds, and the host's IEEE reference as the third opinion) on every special pair, every bf16
// value and random vectors; the PE's MAC crossed over special operands and partial sums; the
// TestFloat-style vector files of `tessera fpu-check` through both builds; and three whole
// training steps of the N = 16 chip on both builds — the training state in HBM, the metrics,
// the cycle count and every performance counter identical after each step.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "Vtpu_fpu.h"
#include "Vtpu_fpu_host.h"
#include "Vtpu_mxu_pe.h"
#include "Vtpu_mxu_pe_host.h"
#include "harness/sim_ctrl.h"
#include "sim/host_arith.h"
#include "sw/numerics/fp_ref.h"
#include "sw/tools/fpu_check.h"
#include "tessera/dense_step.h"
#include "tessera/driver.h"
#include "tests/common/example_cnn.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

using fp::hex16;
using fp::hex32;

TEST(HostArith, HostEnvironmentIsRoundToNearestWithSubnormals) {
  EXPECT_TRUE(tessera_host_arith::environment_ok());
  EXPECT_TRUE(fp::host_keeps_subnormals());
}

// The three word-level operations the flavour replaces, on both builds of tpu_fpu.
class HostArithFpu : public ::testing::Test {
 protected:
  struct Results {
    uint32_t rtl, host;
  };
  Results add(uint32_t a, uint32_t b) {
    rtl_->add_a_i = host_->add_a_i = a;
    rtl_->add_b_i = host_->add_b_i = b;
    rtl_.eval();
    host_.eval();
    return {rtl_->add_o, host_->add_o};
  }
  Results bf16_mul(uint16_t a, uint16_t b) {
    rtl_->mul_a_i = host_->mul_a_i = a;
    rtl_->mul_b_i = host_->mul_b_i = b;
    rtl_.eval();
    host_.eval();
    return {rtl_->mul_o, host_->mul_o};
  }
  Results fp32_mul(uint32_t a, uint32_t b) {
    rtl_->fmul_a_i = host_->fmul_a_i = a;
    rtl_->fmul_b_i = host_->fmul_b_i = b;
    rtl_.eval();
    host_.eval();
    return {rtl_->fmul_o, host_->fmul_o};
  }
  // Both builds and the host reference agree, or the first few differences are reported.
  void check(const char* op, const std::string& operands, Results r, uint32_t want) {
    ++cases_;
    if (r.rtl == r.host && r.rtl == want) return;
    if (++mismatches_ <= 10)
      ADD_FAILURE() << op << " " << operands << ": rtl " << hex32(r.rtl) << ", host build "
                    << hex32(r.host) << ", reference " << hex32(want);
  }
  void check_add(uint32_t a, uint32_t b) {
    check("add", hex32(a) + " " + hex32(b), add(a, b), fp::add(a, b));
  }
  void check_fmul(uint32_t a, uint32_t b) {
    check("fp32 mul", hex32(a) + " " + hex32(b), fp32_mul(a, b), fp::mul(a, b));
  }
  void check_bf16_mul(uint16_t a, uint16_t b) {
    check("bf16 mul", hex16(a) + " " + hex16(b), bf16_mul(a, b), fp::bf16_mul(a, b));
  }
  void TearDown() override {
    EXPECT_EQ(mismatches_, 0u) << mismatches_ << " of " << cases_ << " cases differ";
    std::cout << "[ vectors  ] " << cases_ << " cases, " << mismatches_ << " mismatches\n";
  }

  CombSim<Vtpu_fpu> rtl_;
  CombSim<Vtpu_fpu_host> host_;
  uint64_t cases_ = 0, mismatches_ = 0;
};

TEST_F(HostArithFpu, SpecialClassesPairwise) {
  const auto f = test::fp32_specials();
  for (uint32_t a : f) {
    for (uint32_t b : f) {
      check_add(a, b);
      check_fmul(a, b);
    }
  }
  const auto h = test::bf16_specials();
  for (uint16_t a : h)
    for (uint16_t b : h) check_bf16_mul(a, b);
}

// Every bf16 value against a sample of partners: every exponent and significand of one operand
// meets products that overflow, turn subnormal and underflow.
TEST_F(HostArithFpu, EveryBf16ValueTimesRandomPartners) {
  test::Bf16Gen gen(test::test_seed());
  for (uint32_t a = 0; a < 65536; ++a)
    for (int k = 0; k < 16; ++k) check_bf16_mul(static_cast<uint16_t>(a), gen());
}

TEST_F(HostArithFpu, RandomVectors) {
  const uint64_t n = test::vector_count(300000);
  test::Fp32Gen f(test::test_seed());
  test::Bf16Gen h(test::test_seed() + 1);
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t a = f(), b = f();
    check_add(a, b);
    check_add(a, a ^ 0x80000000u ^ (b & 0xFFu));  // near-cancellation
    check_fmul(a, b);
    check_bf16_mul(h(), h());
  }
}

// One PE of each build, fed the same operands cycle by cycle (the MAC: two IEEE roundings).
class HostArithPe : public ::testing::Test {
 protected:
  HostArithPe() {
    for_both([](auto& s) {
      s->en_i = 0;
      s->wload_valid_i = 0;
      s.reset();
    });
  }
  template <class F>
  void for_both(F f) {
    f(rtl_);
    f(host_);
  }
  void load(int bank, uint16_t w) {
    for_both([&](auto& s) {
      s->wload_valid_i = 1;
      s->wload_bank_i = bank;
      s->wload_data_i = w;
      s.tick();
      s->wload_valid_i = 0;
    });
  }
  void mac(uint32_t psum, uint16_t a, int bank, uint16_t w) {
    for_both([&](auto& s) {
      s->en_i = 1;
      s->act_i = a;
      s->act_bank_i = bank;
      s->psum_i = psum;
      s.tick();
      s->en_i = 0;
    });
    ++cases_;
    const uint32_t want = fp::mac(psum, a, w);
    if (rtl_->psum_o == want && host_->psum_o == want) return;
    if (++mismatches_ <= 10)
      ADD_FAILURE() << "psum " << hex32(psum) << " + " << hex16(a) << " * " << hex16(w) << ": rtl "
                    << hex32(rtl_->psum_o) << ", host build " << hex32(host_->psum_o)
                    << ", reference " << hex32(want);
  }
  void TearDown() override {
    EXPECT_EQ(mismatches_, 0u) << mismatches_ << " of " << cases_ << " MACs differ";
    std::cout << "[ vectors  ] " << cases_ << " MACs, " << mismatches_ << " mismatches\n";
  }
  SimCtrl<Vtpu_mxu_pe> rtl_;
  SimCtrl<Vtpu_mxu_pe_host> host_;
  uint64_t cases_ = 0, mismatches_ = 0;
};

TEST_F(HostArithPe, MacSpecialOperandsCrossedWithSpecialPartialSums) {
  const auto bf = test::bf16_specials();
  const auto f32 = test::fp32_specials();
  for (uint16_t w : bf) {
    load(1, w);
    for (uint16_t a : bf)
      for (uint32_t psum : f32) mac(psum, a, 1, w);
  }
}

TEST_F(HostArithPe, MacRandomOperands) {
  test::Bf16Gen bf(test::test_seed());
  test::Fp32Gen f32(test::test_seed() + 1);
  const uint64_t n = test::vector_count(100000);
  for (uint64_t i = 0; i < n; ++i) {
    const uint16_t w = bf();
    load(0, w);
    mac(i % 4 == 0 ? 0u : f32(), bf(), 0, w);  // a quarter with a zero partial sum (the top row)
  }
}

// `tessera fpu-check` vector files (TestFloat's `a b expected flags` form) through both builds:
// the same verdicts, a planted wrong expectation caught by both at its line.
TEST(HostArithVectors, FpuCheckFilesGiveTheSameVerdictOnBothBuilds) {
  const std::string dir = ::testing::TempDir();
  test::Fp32Gen f(test::test_seed());
  test::Bf16Gen h(test::test_seed() + 1);
  struct OpFile {
    tools::FpuOp op;
    const char* name;
  };
  for (const OpFile& of : {OpFile{tools::FpuOp::kAdd, "add"}, OpFile{tools::FpuOp::kMul, "mul"},
                           OpFile{tools::FpuOp::kBf16Mul, "bf16mul"}}) {
    const std::string path = dir + "/host_arith_" + of.name + ".txt";
    {
      std::ofstream out(path);
      out << "# " << of.name << ": a b expected flags\n";
      for (int i = 0; i < 5000; ++i) {
        uint32_t a, b, want;
        if (of.op == tools::FpuOp::kBf16Mul) {
          a = h();
          b = h();
          want = fp::bf16_mul(static_cast<uint16_t>(a), static_cast<uint16_t>(b));
          out << std::hex << a << " " << b << " " << want << " 00\n";
        } else {
          a = f();
          b = f();
          want = of.op == tools::FpuOp::kAdd ? fp::add(a, b) : fp::mul(a, b);
          out << std::hex << a << " " << b << " " << want << " 00\n";
        }
      }
    }
    for (bool host : {false, true}) {
      std::ostringstream out, err;
      EXPECT_EQ(tools::run_fpu_check(of.op, path, out, err, host), 0)
          << of.name << (host ? " host build: " : " rtl: ") << out.str() << err.str();
      EXPECT_NE(out.str().find("5000 cases, 0 mismatches"), std::string::npos) << out.str();
    }
    // A wrong expected value on line 3 (the second case): both builds report that line.
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    in.close();
    std::istringstream second(lines[2]);
    std::string ta, tb, texp, tflags;
    second >> ta >> tb >> texp >> tflags;
    const uint32_t wrong = (std::stoul(texp, nullptr, 16) ^ 1u) & 0x7F7FFFFFu;  // not a NaN
    std::ostringstream fixed;
    fixed << ta << " " << tb << " " << std::hex << wrong << " 00";
    lines[2] = fixed.str();
    {
      std::ofstream out(path);
      for (const auto& l : lines) out << l << "\n";
    }
    for (bool host : {false, true}) {
      std::ostringstream out, err;
      EXPECT_EQ(tools::run_fpu_check(of.op, path, out, err, host), 1) << out.str() << err.str();
      EXPECT_NE(out.str().find("mismatch line 3:"), std::string::npos) << out.str();
      EXPECT_NE(out.str().find("1 mismatches"), std::string::npos) << out.str();
    }
  }
}

// Three training steps of the example CNN on the N = 16 chip, once per build, each step a new
// batch: after every step the whole training state in HBM, the metrics, the cycle count and all
// 13 performance counters are the same bytes.
TEST(HostArithChip, ThreeTrainingStepsBitIdenticalToTheRtlBuild) {
  constexpr uint32_t kBatch = 8;
  driver::DeviceConfig cfg = driver::chip_for_array(16);
  cfg.backend = driver::Backend::kRtl;
  ASSERT_TRUE(driver::rtl_host_arith_built(cfg));
  const compiler::DenseStackSpec spec = test::example_cnn_spec();
  const tessera::ChipShape chip{cfg.n, cfg.ub_bytes, cfg.acc_rows};
  std::unique_ptr<driver::Device> dev[2];
  std::unique_ptr<compiler::DenseStackStep> step[2];
  uint64_t prog[2];
  for (int b = 0; b < 2; ++b) {
    cfg.arith = b == 0 ? driver::Arith::kRtl : driver::Arith::kHost;
    dev[b] = driver::Device::open(cfg);
    const uint64_t base = dev[b]->alloc(compiler::DenseStackStep::data_bytes(spec, chip, kBatch));
    step[b] = std::make_unique<compiler::DenseStackStep>(spec, compiler::OptimizerSpec{}, chip,
                                                         kBatch, base);
    prog[b] = dev[b]->load_program(step[b]->program_bytes());
    for (const auto& w :
         step[b]->state_image(compiler::glorot_init(spec, 5), compiler::zero_opt_state(spec)))
      dev[b]->write(w.first, w.second);
  }
  ASSERT_EQ(step[0]->program_bytes(), step[1]->program_bytes());
  std::mt19937 rng(static_cast<uint32_t>(test::test_seed()));
  const compiler::DenseStackStep::Layout& L = step[0]->layout();
  const auto [state_lo, state_bytes] = step[0]->state_range();
  for (int s = 0; s < 3; ++s) {
    std::vector<uint16_t> img(size_t{kBatch} * 784);
    std::vector<uint8_t> lbl(kBatch);
    for (auto& v : img) v = fp::fp32_to_bf16(fp::bits(static_cast<float>(rng() % 256) / 255.0f));
    for (auto& v : lbl) v = static_cast<uint8_t>(rng() % 10);
    driver::RunReport rep[2];
    for (int b = 0; b < 2; ++b) {
      for (const auto& w : step[b]->batch_image(img, lbl)) dev[b]->write(w.first, w.second);
      rep[b] = dev[b]->run(prog[b], 400'000'000);
    }
    EXPECT_GT(rep[0].cycles, 0u);
    EXPECT_EQ(rep[0].cycles, rep[1].cycles) << "step " << s;
    for (int i = 0; i < driver::kPerfCounters; ++i)
      EXPECT_EQ(rep[0].perf[i], rep[1].perf[i]) << "step " << s << ": PERF[" << i << "]";
    const auto a = dev[0]->read(state_lo, state_bytes);
    const auto h = dev[1]->read(state_lo, state_bytes);
    size_t diff = 0;
    while (diff < a.size() && a[diff] == h[diff]) ++diff;
    EXPECT_EQ(diff, a.size()) << "step " << s << ": the training state differs at HBM 0x"
                              << std::hex << state_lo + diff;
    EXPECT_EQ(dev[0]->read(L.metrics, 2 * cfg.n * 4), dev[1]->read(L.metrics, 2 * cfg.n * 4))
        << "step " << s << ": loss / accuracy";
    std::printf("step %d: %llu cycles on both builds\n", s,
                static_cast<unsigned long long>(rep[0].cycles));
  }
}

TEST(HostArithChip, ChipsWithoutAHostBuildAreRefusedByName) {
  driver::DeviceConfig cfg = driver::chip_for_array(4);
  cfg.backend = driver::Backend::kRtl;
  cfg.arith = driver::Arith::kHost;
  try {
    driver::Device::open(cfg);
    FAIL() << "an N = 4 host-arithmetic chip opened";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--arith host"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("N = 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(driver::parse_arith("fast"), std::invalid_argument);
  EXPECT_EQ(driver::parse_arith("host"), driver::Arith::kHost);
}

}  // namespace
}  // namespace tessera
