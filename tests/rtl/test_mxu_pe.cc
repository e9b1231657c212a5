// The single processing element (tpu_mxu_pe): its MAC against the reference (psum + a * w,
// two IEEE roundings), both weight banks, the one-cycle pass-through of activation, tag and
// load token, and that a weight written in a cycle is used only from the next cycle on.
#include <gtest/gtest.h>

#include "Vtpu_mxu_pe.h"
#include "harness/sim_ctrl.h"
#include "sw/numerics/fp_ref.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

class MxuPe : public ::testing::Test {
 protected:
  MxuPe() : sim_(test::current_test_name()) {
    sim_->en_i = 0;
    sim_->wload_valid_i = 0;
    sim_.reset();
  }
  void load(int bank, uint16_t w) {
    sim_->wload_valid_i = 1;
    sim_->wload_bank_i = bank;
    sim_->wload_data_i = w;
    sim_.tick();
    sim_->wload_valid_i = 0;
  }
  SimCtrl<Vtpu_mxu_pe> sim_;
};

TEST_F(MxuPe, MacMatchesReferenceOnBothBanks) {
  test::Bf16Gen bf(test::test_seed());
  test::Fp32Gen f32(test::test_seed() + 1);
  for (int i = 0; i < 20000; ++i) {
    const uint16_t w0 = bf(), w1 = bf(), a = bf();
    const uint32_t psum = f32();
    const int bank = i & 1;
    load(0, w0);
    load(1, w1);
    sim_->en_i = 1;
    sim_->act_i = a;
    sim_->act_bank_i = bank;
    sim_->psum_i = psum;
    sim_.tick();
    sim_->en_i = 0;
    const uint32_t want = fp::mac(psum, a, bank ? w1 : w0);
    ASSERT_EQ(sim_->psum_o, want) << "psum " << fp::hex32(psum) << " + " << fp::hex16(a) << " * "
                                  << fp::hex16(bank ? w1 : w0);
    ASSERT_EQ(sim_->act_o, a);
    ASSERT_EQ(sim_->act_bank_o, bank);
  }
}

// Every pair of special bf16 operands against every special partial sum: the MAC's short
// paths (a zero product leaves a non-zero, non-NaN sum as it is; a zero sum passes a non-zero
// product through) must give what the two IEEE roundings give — signed zeros, 0 * inf = NaN,
// NaN sums, subnormal sums and products.
TEST_F(MxuPe, MacSpecialClassesCrossedIncludingZeroShortPaths) {
  const std::vector<uint16_t> bf = test::bf16_specials();
  const std::vector<uint32_t> f32 = test::fp32_specials();
  for (uint16_t w : bf) {
    load(0, w);
    for (uint16_t a : bf) {
      for (uint32_t psum : f32) {
        sim_->en_i = 1;
        sim_->act_i = a;
        sim_->act_bank_i = 0;
        sim_->psum_i = psum;
        sim_.tick();
        const uint32_t want = fp::mac(psum, a, w);
        ASSERT_EQ(sim_->psum_o, want)
            << "psum " << fp::hex32(psum) << " + " << fp::hex16(a) << " * " << fp::hex16(w);
      }
    }
  }
  sim_->en_i = 0;
}

TEST_F(MxuPe, WeightWrittenThisCycleIsUsedFromTheNext) {
  load(0, 0x3F80);  // 1.0
  // Same cycle: MAC with bank 0 while a token overwrites bank 0 with 2.0.
  sim_->en_i = 1;
  sim_->act_i = 0x4040;  // 3.0
  sim_->act_bank_i = 0;
  sim_->psum_i = 0;
  sim_->wload_valid_i = 1;
  sim_->wload_bank_i = 0;
  sim_->wload_data_i = 0x4000;  // 2.0
  sim_.tick();
  EXPECT_EQ(sim_->psum_o, fp::bits(3.0f));  // old weight
  sim_->wload_valid_i = 0;
  sim_.tick();
  EXPECT_EQ(sim_->psum_o, fp::bits(6.0f));  // new weight
}

TEST_F(MxuPe, ClockEnableHoldsState) {
  load(0, 0x3F80);
  sim_->en_i = 1;
  sim_->act_i = 0x4000;
  sim_->act_bank_i = 0;
  sim_->psum_i = fp::bits(1.0f);
  sim_.tick();
  sim_->en_i = 0;
  sim_->act_i = 0x4080;
  sim_->psum_i = fp::bits(7.0f);
  for (int i = 0; i < 3; ++i) sim_.tick();
  EXPECT_EQ(sim_->psum_o, fp::bits(3.0f));
  EXPECT_EQ(sim_->act_o, 0x4000);
}

}  // namespace
}  // namespace tessera
