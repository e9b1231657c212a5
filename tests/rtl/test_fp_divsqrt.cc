// The iterative divide / square-root unit (tpu_fp_divsqrt) against the host's IEEE arithmetic
// (sw/numerics/fp_ref.h: a / b and std::sqrt on float): every special class pairwise, random
// vectors (TESSERA_FP_VECTORS, default 10^6 per operation; uniform bit patterns, biased patterns,
// subnormal quotients, exact quotients and perfect squares, quotients a hair off a rounding
// midpoint), all issued back to back; the fixed latency for every input, ready_o while busy,
// start_i ignored while busy, and reset in the middle of an operation. A mismatch prints the
// operands, the expected and the produced bits.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "Vtpu_fp_divsqrt.h"
#include "harness/sim_ctrl.h"
#include "sw/numerics/fp_ref.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

using fp::hex32;

// start_i accepted in cycle t -> valid_o in cycle t + kLatency (rtl/fpu/tpu_fp_divsqrt.sv).
constexpr uint64_t kLatency = 9;
constexpr int kDiv = 0, kSqrt = 1;

struct Op {
  int op = kDiv;
  uint32_t a = 0, b = 0;
};

uint32_t reference(const Op& o) { return o.op == kDiv ? fp::div(o.a, o.b) : fp::sqrt(o.a); }

std::string describe(const Op& o) {
  return o.op == kDiv ? hex32(o.a) + " / " + hex32(o.b) : "sqrt " + hex32(o.a);
}

class FpDivSqrt : public ::testing::Test {
 protected:
  FpDivSqrt() : sim_(test::current_test_name()) {
    sim_->start_i = 0;
    sim_->op_i = 0;
    sim_->a_i = 0;
    sim_->b_i = 0;
    sim_.reset();
  }

  void mismatch(const std::string& what) {
    if (++mismatches_ <= 10) ADD_FAILURE() << what;
  }
  void expect_no_mismatch(uint64_t cases) {
    EXPECT_EQ(mismatches_, 0u) << mismatches_ << " of " << cases << " cases differ";
    std::cout << "[ vectors  ] " << cases << " cases, " << mismatches_ << " mismatches\n";
  }

  // Runs `n` operations from `next` back to back: each starts in the cycle ready_o is high
  // (the cycle its predecessor's valid_o pulses). Checks every result against the reference,
  // that it arrives exactly kLatency cycles after its start, that valid_o pulses once per
  // operation and that ready_o stays low while an operation is in flight.
  void stream(uint64_t n, const std::function<Op()>& next) {
    uint64_t issued = 0, done = 0, start_cycle = 0;
    bool in_flight = false;
    Op cur;
    while (done < n) {
      sim_.eval();
      const bool starting = sim_->ready_o && issued < n;
      if (starting) {
        cur = next();
        sim_->op_i = cur.op;
        sim_->a_i = cur.a;
        sim_->b_i = cur.b;
      }
      sim_->start_i = starting;
      if (starting) start_cycle = sim_.cycle();  // the cycle start_i is accepted in
      if (in_flight && sim_->ready_o) {
        mismatch("ready_o high while " + describe(cur) + " is in flight");
        return;
      }
      sim_.tick();
      if (starting) {
        ++issued;
        in_flight = true;
      }
      if (sim_->valid_o) {
        if (!in_flight) {
          mismatch("valid_o with no operation in flight");
          return;
        }
        const uint64_t latency = sim_.cycle() - start_cycle;
        if (latency != kLatency) {
          mismatch(describe(cur) + ": latency " + std::to_string(latency));
        }
        const uint32_t want = reference(cur), got = sim_->result_o;
        if (want != got) mismatch(describe(cur) + ": want " + hex32(want) + " got " + hex32(got));
        in_flight = false;
        ++done;
      } else if (in_flight && sim_.cycle() - start_cycle > kLatency) {
        mismatch(describe(cur) + ": no valid_o after " + std::to_string(kLatency) + " cycles");
        return;
      }
    }
    sim_->start_i = 0;
  }

  SimCtrl<Vtpu_fp_divsqrt> sim_;
  uint64_t mismatches_ = 0;
};

uint32_t make_fp32(uint32_t sign, int exp, uint32_t frac) {
  return (sign << 31) | (static_cast<uint32_t>(exp) << 23) | (frac & 0x7FFFFFu);
}

TEST_F(FpDivSqrt, HostArithmeticIsIeee) {
  ASSERT_TRUE(fp::host_keeps_subnormals())
      << "the host flushes subnormals or does not round to nearest: the reference is invalid";
  EXPECT_EQ(fp::div(0x3F800000u, 0), 0x7F800000u);  // 1 / +0 = +inf
  EXPECT_EQ(fp::div(0, 0), fp::kFp32CanonicalNan);  // 0 / 0
  EXPECT_EQ(fp::sqrt(0x80000000u), 0x80000000u);    // sqrt(-0) = -0
  EXPECT_EQ(fp::sqrt(0xBF800000u), fp::kFp32CanonicalNan);
}

TEST_F(FpDivSqrt, DivSpecialClassesPairwise) {
  const auto s = test::fp32_specials();
  size_t i = 0;
  stream(s.size() * s.size(), [&] {
    const Op o{kDiv, s[i / s.size()], s[i % s.size()]};
    ++i;
    return o;
  });
  expect_no_mismatch(s.size() * s.size());
}

TEST_F(FpDivSqrt, SqrtSpecialClasses) {
  const auto s = test::fp32_specials();
  size_t i = 0;
  stream(s.size(), [&] { return Op{kSqrt, s[i++], 0}; });
  expect_no_mismatch(s.size());
}

TEST_F(FpDivSqrt, LatencyIsFixedForEveryInputClass) {
  // One operation at a time from idle, for every special pair and every special radicand:
  // valid_o rises exactly kLatency cycles after the accepting edge, and never earlier.
  const auto s = test::fp32_specials();
  uint64_t cases = 0;
  auto one = [&](const Op& o) {
    for (int idle = 0; idle < 2; ++idle) sim_.tick();  // from idle, not back to back
    sim_->start_i = 1;
    sim_->op_i = o.op;
    sim_->a_i = o.a;
    sim_->b_i = o.b;
    sim_.eval();
    ASSERT_TRUE(sim_->ready_o);
    sim_.tick();
    sim_->start_i = 0;
    sim_->a_i = 0x12345678u;  // operands may change once accepted
    sim_->b_i = 0x9ABCDEF0u;
    uint64_t cycles = 1;
    while (!sim_->valid_o && cycles <= kLatency + 2) {
      if (sim_->ready_o) mismatch(describe(o) + ": ready_o high while busy");
      sim_.tick();
      ++cycles;
    }
    ++cases;
    if (cycles != kLatency) mismatch(describe(o) + ": latency " + std::to_string(cycles));
    if (sim_->result_o != reference(o)) mismatch(describe(o) + ": wrong result");
    sim_.tick();
    if (sim_->valid_o) mismatch(describe(o) + ": valid_o longer than one cycle");
  };
  for (uint32_t a : s) {
    one(Op{kSqrt, a, 0});
    for (uint32_t b : s) one(Op{kDiv, a, b});
  }
  expect_no_mismatch(cases);
}

TEST_F(FpDivSqrt, StartIgnoredWhileBusy) {
  // start_i held high with other operands during an operation: the first result is unchanged,
  // and the held request is accepted in the cycle the unit is ready again.
  sim_->start_i = 1;
  sim_->op_i = kDiv;
  sim_->a_i = 0x3F800000u;  // 1 / 3
  sim_->b_i = 0x40400000u;
  sim_.tick();
  sim_->op_i = kSqrt;
  sim_->a_i = 0x40000000u;  // sqrt 2, held until accepted
  uint64_t cycles = 1;
  while (!sim_->valid_o) {
    ASSERT_FALSE(sim_->ready_o) << "cycle " << cycles;
    sim_.tick();
    ASSERT_LE(++cycles, kLatency);
  }
  EXPECT_EQ(cycles, kLatency);
  EXPECT_EQ(sim_->result_o, fp::div(0x3F800000u, 0x40400000u));
  EXPECT_TRUE(sim_->ready_o);
  sim_.tick();  // the held start is accepted here
  sim_->start_i = 0;
  cycles = 1;
  while (!sim_->valid_o) {
    sim_.tick();
    ASSERT_LE(++cycles, kLatency);
  }
  EXPECT_EQ(cycles, kLatency);
  EXPECT_EQ(sim_->result_o, fp::sqrt(0x40000000u));
}

TEST_F(FpDivSqrt, ResetInTheMiddleOfAnOperation) {
  for (int when = 1; when < static_cast<int>(kLatency); ++when) {
    sim_->start_i = 1;
    sim_->op_i = kDiv;
    sim_->a_i = 0x40490FDBu;  // pi / e
    sim_->b_i = 0x402DF854u;
    sim_.tick();
    sim_->start_i = 0;
    for (int i = 1; i < when; ++i) {
      sim_.tick();
      ASSERT_FALSE(sim_->valid_o);
    }
    sim_.reset();
    // Reset abandons the operation: idle, no result pulse later.
    EXPECT_TRUE(sim_->ready_o) << "reset after " << when << " cycles";
    for (uint64_t i = 0; i < kLatency + 4; ++i) {
      EXPECT_FALSE(sim_->valid_o) << "valid_o after reset, " << when << " cycles in";
      sim_.tick();
    }
    // And the unit works normally afterwards.
    stream(1, [] { return Op{kSqrt, 0x40400000u, 0}; });
  }
  expect_no_mismatch(kLatency - 1);
}

// Random dividends and divisors: uniform bit patterns, biased patterns (test::Fp32Gen),
// quotients in and below the subnormal range, exact quotients, and quotients a hair (|r| / B,
// r <= 3) off a rounding midpoint or a representable value.
class DivGen {
 public:
  explicit DivGen(uint64_t seed) : gen_(seed) {}
  Op operator()() {
    auto& rng = gen_.rng();
    const uint32_t r = static_cast<uint32_t>(rng());
    switch (rng() % 6) {
      case 0:
        return {kDiv, r, static_cast<uint32_t>(rng())};
      case 1:
        return {kDiv, gen_(), gen_()};
      case 2: {  // quotient exponent -30 .. +2 around the subnormal boundary (biased)
        const int eb = 1 + static_cast<int>(rng() % 254);
        int ea = eb - 127 - 30 + static_cast<int>(rng() % 33);
        if (ea < 0) ea = 0;
        uint32_t fa = r & 0x7FFFFFu;
        if (ea == 0 && fa == 0) fa = 1;
        // Half the divisors are powers of two: the quotient is then exact at 24 bits and only
        // the bits the subnormal shift pushes out decide the rounding (remainder zero).
        const uint32_t fb = (rng() & 1) ? static_cast<uint32_t>(rng()) : 0u;
        return {kDiv, make_fp32(rng() & 1, ea, fa), make_fp32(rng() & 1, eb, fb)};
      }
      case 3: {  // exact: a = q * b with short significands, so a / b = q exactly
        const uint32_t q = make_fp32(rng() & 1, 64 + static_cast<int>(rng() % 128),
                                     static_cast<uint32_t>(rng()) & 0x7FF000u);
        const uint32_t b = make_fp32(rng() & 1, 64 + static_cast<int>(rng() % 128),
                                     static_cast<uint32_t>(rng()) & 0x7FE000u);
        return {kDiv, fp::mul(q, b), b};
      }
      default:
        return near_midpoint();
    }
  }

 private:
  // A * 2^24 = Qm * B + r with r small, A and B 24-bit significands, A >= B: the quotient's
  // 25 bits past the point are Qm and the rest is r / B. Qm odd: a hair off a midpoint; even:
  // a hair off a representable value. B odd, so 2^24 is invertible modulo B.
  Op near_midpoint() {
    auto& rng = gen_.rng();
    for (;;) {
      const uint64_t B = (1u << 23) | (static_cast<uint32_t>(rng()) & 0x7FFFFFu) | 1u;
      int64_t rr = static_cast<int64_t>(rng() % 7) - 3;
      if (rr == 0) rr = 1;
      uint64_t inv2 = (B + 1) / 2, inv = 1;  // inverse of 2 mod B, then of 2^24
      for (int i = 0; i < 24; ++i) inv = (inv * inv2) % B;
      const uint64_t rmod =
          static_cast<uint64_t>((rr % static_cast<int64_t>(B) + static_cast<int64_t>(B))) % B;
      const uint64_t A = (rmod * inv) % B + B;
      if (A >= (1u << 24)) continue;
      const int eb = 2 + static_cast<int>(rng() % 250);
      const int ea = std::max(1, std::min(254, eb + static_cast<int>(rng() % 61) - 30));
      return {kDiv, make_fp32(rng() & 1, ea, static_cast<uint32_t>(A)),
              make_fp32(rng() & 1, eb, static_cast<uint32_t>(B))};
    }
  }
  test::Fp32Gen gen_;
};

// Random radicands: uniform bits, biased patterns, subnormals, every exponent (odd and even),
// perfect squares (short roots squared, exact) and their neighbours one ulp away.
class SqrtGen {
 public:
  explicit SqrtGen(uint64_t seed) : gen_(seed) {}
  Op operator()() {
    auto& rng = gen_.rng();
    const uint32_t r = static_cast<uint32_t>(rng());
    switch (rng() % 6) {
      case 0:
        return {kSqrt, r, 0};
      case 1:
        return {kSqrt, gen_(), 0};
      case 2:
        return {kSqrt, r & 0x007FFFFFu, 0};  // positive subnormals
      case 3:
        return {kSqrt, r & 0x7FFFFFFFu, 0};  // positive, any exponent
      default: {                             // a perfect square, or one ulp either side
        const uint32_t root = make_fp32(0, 64 + static_cast<int>(rng() % 128),
                                        static_cast<uint32_t>(rng()) & 0x7FF800u);
        const uint32_t sq = fp::mul(root, root);
        return {kSqrt, sq + static_cast<uint32_t>(static_cast<int>(rng() % 3) - 1), 0};
      }
    }
  }

 private:
  test::Fp32Gen gen_;
};

TEST_F(FpDivSqrt, DivRandom) {
  DivGen gen(test::test_seed());
  const uint64_t n = test::vector_count(1000000);
  stream(n, [&] { return gen(); });
  expect_no_mismatch(n);
}

TEST_F(FpDivSqrt, SqrtRandom) {
  SqrtGen gen(test::test_seed());
  const uint64_t n = test::vector_count(1000000);
  stream(n, [&] { return gen(); });
  expect_no_mismatch(n);
}

TEST_F(FpDivSqrt, DivAndSqrtInterleaved) {
  // Alternating operations back to back: nothing of one operation leaks into the next.
  DivGen dg(test::test_seed());
  SqrtGen sg(test::test_seed() + 1);
  uint64_t i = 0;
  stream(100000, [&] { return (i++ % 3 == 0) ? sg() : dg(); });
  expect_no_mismatch(100000);
}

}  // namespace
}  // namespace tessera
