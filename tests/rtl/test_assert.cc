// The one-cycle invariant macros of rtl/pkg/tpu_assert.svh (TPU_ASSERT_NEXT, TPU_ASSERT_HELD)
// on a probe module whose inputs are their operands: each reports an $error at the clock edge
// where its property fails, stays quiet wherever it holds, and forgets a pending check in reset.
#include <gtest/gtest.h>

#include <cstdint>

#include "Vtpu_assert_probe.h"
#include "harness/sim_ctrl.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

class AssertProbe : public ::testing::Test {
 protected:
  AssertProbe() : sim_(test::current_test_name()) {
    sim_.context().fatalOnError(false);
    auto& m = sim_.top();
    m.ante_i = m.cons_i = m.valid_i = m.ready_i = 0;
    m.value_i = 0;
    sim_.reset();
  }
  // One clock edge with these inputs; true when an $error was reported at it.
  bool next(bool ante, bool cons) {
    sim_.top().ante_i = ante;
    sim_.top().cons_i = cons;
    return edge();
  }
  bool held(bool valid, bool ready, uint8_t value) {
    sim_.top().valid_i = valid;
    sim_.top().ready_i = ready;
    sim_.top().value_i = value;
    return edge();
  }
  bool edge() {
    sim_.context().gotError(false);
    sim_.tick();
    return sim_.context().gotError();
  }
  SimCtrl<Vtpu_assert_probe> sim_;
};

TEST_F(AssertProbe, NextReportsOnlyAConsequentMissingTheCycleAfter) {
  EXPECT_FALSE(next(false, false));  // no antecedent: nothing to check
  EXPECT_FALSE(next(true, false));   // the antecedent; the consequent is due next cycle
  EXPECT_FALSE(next(true, true));    // due and present; a new antecedent
  EXPECT_TRUE(next(false, false));   // due and missing
  EXPECT_FALSE(next(false, false));
  EXPECT_FALSE(next(true, true));   // the same cycle's consequent does not count...
  EXPECT_TRUE(next(false, false));  // ...the next cycle's does
}

TEST_F(AssertProbe, HeldReportsAnOfferDroppedOrChangedBeforeItIsTaken) {
  EXPECT_FALSE(held(true, false, 5));  // offered, not taken
  EXPECT_FALSE(held(true, false, 5));  // offered again, unchanged
  EXPECT_FALSE(held(true, true, 5));   // taken
  EXPECT_FALSE(held(true, true, 9));   // a new offer, taken at once: may change freely
  EXPECT_FALSE(held(false, false, 1));
  EXPECT_FALSE(held(true, false, 7));
  EXPECT_TRUE(held(true, false, 8));  // changed while not taken
  EXPECT_FALSE(held(true, true, 8));  // (8 was offered and not taken: unchanged now)
  EXPECT_FALSE(held(true, false, 3));
  EXPECT_TRUE(held(false, false, 3));  // withdrawn before it was taken
}

TEST_F(AssertProbe, ResetDropsAPendingCheck) {
  auto& m = sim_.top();
  m.ante_i = 1;  // both checks armed at this edge: a consequent and an unchanged offer now due
  m.cons_i = 0;
  EXPECT_FALSE(held(true, false, 4));
  sim_.context().gotError(false);
  m.ante_i = 0;
  m.valid_i = 0;
  sim_.reset();
  EXPECT_FALSE(sim_.context().gotError());
  EXPECT_FALSE(next(false, false));  // the antecedent before reset is forgotten
  EXPECT_FALSE(held(false, false, 0));
}

}  // namespace
}  // namespace tessera
