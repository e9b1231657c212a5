// The verilated MXU (tpu_mxu) at N = 4, 8, 16 and 128 against the architectural reference
// (sw/numerics/mxu_ref.h): random matmuls of shapes that are not multiples of N with K accumulated
// over several tiles, bit-exact; exact cycle counts against the documented formula;
// back-to-back work; the accumulate path's read-modify-write bypass; special values; reset in
// the middle of work. Mismatches print the index and both values.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "Vtpu_mxu_n128.h"
#include "Vtpu_mxu_n16.h"
#include "Vtpu_mxu_n4.h"
#include "Vtpu_mxu_n8.h"
#include "harness/mxu_driver.h"
#include "harness/vl_bits.h"
#include "sw/numerics/fp_ref.h"
#include "sw/numerics/mxu_ref.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

using mxu::reference_matmul;
using mxu::tile_sequence_cycles;

template <class M, int Dim>
struct Config {
  using Model = M;
  static constexpr int N = Dim;
};
using Configs =
    ::testing::Types<Config<Vtpu_mxu_n4, 4>, Config<Vtpu_mxu_n8, 8>, Config<Vtpu_mxu_n16, 16>>;
struct ConfigNames {
  template <class T>
  static std::string GetName(int) {
    return "N" + std::to_string(T::N);
  }
};

// Ordinary training-like values: bf16 of magnitude ~2^-6 .. 2^4, either sign.
std::vector<uint16_t> random_bf16(std::mt19937_64& rng, size_t count) {
  std::vector<uint16_t> v(count);
  for (auto& x : v) {
    const uint16_t exp = static_cast<uint16_t>(121 + rng() % 11);
    x = static_cast<uint16_t>((rng() & 0x807F) | (exp << 7));
  }
  return v;
}

// Compares m x n results; reports the first mismatches with their index and both values.
void expect_bits_equal(const std::vector<uint32_t>& want, const std::vector<uint32_t>& got,
                       int n_cols) {
  ASSERT_EQ(want.size(), got.size());
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != got[i] && ++bad <= 8) {
      ADD_FAILURE() << "C[" << i / n_cols << "][" << i % n_cols << "]: want " << fp::hex32(want[i])
                    << " (" << fp::f32(want[i]) << ") got " << fp::hex32(got[i]) << " ("
                    << fp::f32(got[i]) << ")";
    }
  }
  EXPECT_EQ(bad, 0) << bad << " of " << want.size() << " results differ";
}

template <class Cfg>
class MxuMatmul : public ::testing::Test {
 protected:
  static constexpr int N = Cfg::N;
  using Driver = mxu::MxuDriver<typename Cfg::Model, Cfg::N>;

  MxuMatmul() : sim_(test::current_test_name()), drv_(sim_), rng_(test::test_seed()) {
    sim_.reset();
  }

  // Runs one random m x k x n matmul, checks the bits and the exact cycle count.
  void check_matmul(int m, int k, int n) {
    SCOPED_TRACE("shape m=" + std::to_string(m) + " k=" + std::to_string(k) +
                 " n=" + std::to_string(n));
    const auto a = random_bf16(rng_, size_t(m) * k);
    const auto w = random_bf16(rng_, size_t(k) * n);
    const auto res = drv_.matmul(m, k, n, a, w);
    expect_bits_equal(reference_matmul(N, m, k, n, a, w), res.c, n);
    const int folds = mxu::ceil_div(k, N) * mxu::ceil_div(n, N);
    EXPECT_EQ(res.cycles, tile_sequence_cycles(N, folds, m));
  }

  SimCtrl<typename Cfg::Model> sim_;
  Driver drv_;
  std::mt19937_64 rng_;
};
TYPED_TEST_SUITE(MxuMatmul, Configs, ConfigNames);

TYPED_TEST(MxuMatmul, SingleTileIdentityWeights) {
  constexpr int N = TestFixture::N;
  std::vector<uint16_t> eye(N * N, 0), a = random_bf16(this->rng_, N * 3);
  for (int i = 0; i < N; ++i) eye[i * N + i] = 0x3F80;  // 1.0
  const auto res = this->drv_.matmul(3, N, N, a, eye);
  std::vector<uint32_t> want(a.size());
  for (size_t i = 0; i < a.size(); ++i) want[i] = fp::bf16_to_fp32(a[i]);  // A * I = A exactly
  expect_bits_equal(want, res.c, N);
}

TYPED_TEST(MxuMatmul, RandomShapesNotMultiplesOfN) {
  constexpr int N = TestFixture::N;
  this->check_matmul(1, 1, 1);
  this->check_matmul(5, N + 3, N - 1);
  this->check_matmul(N + 2, 3 * N - 1, 2 * N + 1);  // K over three tiles, two column tiles
  this->check_matmul(2 * N + 5, 2 * N + 1, N / 2 + 1);
}

TYPED_TEST(MxuMatmul, CycleCountFollowsFormula) {
  constexpr int N = TestFixture::N;
  // rows below, at and above the N + 1 cycles a weight tile needs to stream in behind a tile
  for (int rows : {1, N, N + 1, N + 2, 3 * N}) {
    for (int folds : {1, 2, 3}) {
      SCOPED_TRACE("rows=" + std::to_string(rows) + " folds=" + std::to_string(folds));
      const auto a = random_bf16(this->rng_, size_t(rows) * folds * N);
      const auto w = random_bf16(this->rng_, size_t(folds) * N * N);
      const auto res = this->drv_.matmul(rows, folds * N, N, a, w);
      EXPECT_EQ(res.cycles, tile_sequence_cycles(N, folds, rows));
      expect_bits_equal(reference_matmul(N, rows, folds * N, N, a, w), res.c, N);
    }
  }
}

TYPED_TEST(MxuMatmul, BackToBackMatmulsShareThePipeline) {
  constexpr int N = TestFixture::N;
  // Two independent products queued together: the second's weights load under the first's
  // rows, and its rows follow without a bubble; each lands in its own accumulator rows.
  const int m = N + 3, k = 2 * N, n = N;
  const auto a1 = random_bf16(this->rng_, m * k), w1 = random_bf16(this->rng_, k * n);
  const auto a2 = random_bf16(this->rng_, m * k), w2 = random_bf16(this->rng_, k * n);
  auto queue = [&](const std::vector<uint16_t>& a, const std::vector<uint16_t>& w, uint32_t base) {
    for (int kt = 0; kt < 2; ++kt) {
      std::vector<uint16_t> tile(w.begin() + kt * N * n, w.begin() + (kt + 1) * N * n);
      this->drv_.push_weight_tile(tile);
      for (int r = 0; r < m; ++r) {
        typename TestFixture::Driver::ActRow row{};
        for (int i = 0; i < N; ++i) row.act[i] = a[r * k + kt * N + i];
        row.first = r == 0;
        row.acc_addr = base + r;
        row.accumulate = kt > 0;
        this->drv_.push_act_row(row);
      }
    }
  };
  queue(a1, w1, 0);
  queue(a2, w2, 100);
  const uint64_t cycles = this->drv_.run_until_idle();
  EXPECT_EQ(cycles, tile_sequence_cycles(N, 4, m));
  for (auto [a, w, base] : {std::tuple{&a1, &w1, 0u}, std::tuple{&a2, &w2, 100u}}) {
    const auto rows = this->drv_.read_acc(base, m);
    std::vector<uint32_t> got;
    for (const auto& r : rows) got.insert(got.end(), r.begin(), r.end());
    expect_bits_equal(reference_matmul(N, m, k, n, *a, *w), got, n);
  }
}

TYPED_TEST(MxuMatmul, AccumulateIntoTheSameRowEveryCycle) {
  constexpr int N = TestFixture::N;
  // Every row of two tiles accumulates into accumulator row 7: each read-modify-write reads
  // the row the previous cycle is writing, so the result depends on the bypass path.
  const int rows = 9;
  std::vector<uint32_t> want(N, 0);
  bool first_write = true;
  for (int t = 0; t < 2; ++t) {
    const auto w = random_bf16(this->rng_, N * N);
    this->drv_.push_weight_tile(w);
    for (int r = 0; r < rows; ++r) {
      typename TestFixture::Driver::ActRow row{};
      const auto act = random_bf16(this->rng_, N);
      std::copy(act.begin(), act.end(), row.act.begin());
      row.first = r == 0;
      row.acc_addr = 7;
      row.accumulate = !first_write;
      this->drv_.push_act_row(row);
      const auto sum = reference_matmul(N, 1, N, N, act, w);
      for (int c = 0; c < N; ++c) want[c] = first_write ? sum[c] : fp::add(want[c], sum[c]);
      first_write = false;
    }
  }
  this->drv_.run_until_idle();
  const auto got = this->drv_.read_acc(7, 1);
  expect_bits_equal(want, std::vector<uint32_t>(got[0].begin(), got[0].end()), N);
}

TYPED_TEST(MxuMatmul, SpecialValuesPropagateBitExact) {
  constexpr int N = TestFixture::N;
  // Infinities, NaNs, subnormals, signed zeros and huge/tiny magnitudes mixed into the operands.
  test::Bf16Gen gen(test::test_seed());
  const int m = N + 1, k = 2 * N + 1, n = N + 1;
  std::vector<uint16_t> a(m * k), w(k * n);
  for (auto& x : a) x = gen();
  for (auto& x : w) x = gen();
  const auto res = this->drv_.matmul(m, k, n, a, w);
  expect_bits_equal(reference_matmul(N, m, k, n, a, w), res.c, n);
}

TYPED_TEST(MxuMatmul, ResetInTheMiddleOfWork) {
  constexpr int N = TestFixture::N;
  const int m = 2 * N, k = 2 * N, n = N;
  const auto a = random_bf16(this->rng_, m * k), w = random_bf16(this->rng_, k * n);
  // Start a product, stop it halfway through its first tile, reset.
  std::vector<uint16_t> tile(w.begin(), w.begin() + N * n);
  this->drv_.push_weight_tile(tile);
  for (int r = 0; r < m; ++r) {
    typename TestFixture::Driver::ActRow row{};
    row.first = r == 0;
    row.acc_addr = r;
    this->drv_.push_act_row(row);
  }
  for (int i = 0; i < 2 * N; ++i) this->drv_.step();
  ASSERT_TRUE(this->sim_.top().busy_o);
  this->drv_.clear_queues();
  this->sim_.reset();
  EXPECT_FALSE(this->sim_.top().busy_o);
  EXPECT_TRUE(this->sim_.top().w_ready_o);
  // A fresh product afterwards is exact and takes exactly the formula's cycles.
  const auto res = this->drv_.matmul(m, k, n, a, w);
  expect_bits_equal(reference_matmul(N, m, k, n, a, w), res.c, n);
  EXPECT_EQ(res.cycles, tile_sequence_cycles(N, 2, m));
}

TYPED_TEST(MxuMatmul, ReadPortYieldsToTheAccumulatePathOfItsBank) {
  constexpr int N = TestFixture::N;
  // The accumulator is two banks, rows 0..127 and 128..255 (AccRows 256). Fill rows 0..N-1
  // (overwrite), then accumulate a second tile into them while the host keeps requesting one
  // row every cycle: a row of the same bank (100) is refused exactly in the cycles the
  // accumulate path reads, a row of the other bank (200) never; every answer is the row's
  // contents.
  auto& m = this->sim_.top();
  const auto w1 = random_bf16(this->rng_, N * N), a1 = random_bf16(this->rng_, N * N);
  const auto marker = random_bf16(this->rng_, N);
  auto queue_tile = [&](const std::vector<uint16_t>& w, const std::vector<uint16_t>& a,
                        uint32_t base, bool accumulate, int rows) {
    this->drv_.push_weight_tile(w);
    for (int r = 0; r < rows; ++r) {
      typename TestFixture::Driver::ActRow row{};
      for (int i = 0; i < N; ++i) row.act[i] = a[r * N + i];
      row.first = r == 0;
      row.acc_addr = base + r;
      row.accumulate = accumulate;
      this->drv_.push_act_row(row);
    }
  };
  std::vector<uint16_t> eye(N * N, 0);
  for (int i = 0; i < N; ++i) eye[i * N + i] = 0x3F80;
  std::vector<uint16_t> marker_rows(N * N, 0);
  std::copy(marker.begin(), marker.end(), marker_rows.begin());
  for (const uint32_t probe : {100u, 200u}) {  // the marker there, exact through the identity
    queue_tile(eye, marker_rows, probe, false, 1);
  }
  std::vector<uint32_t> want;
  for (const uint32_t probe : {100u, 200u}) {
    SCOPED_TRACE("reading row " + std::to_string(probe));
    const auto w_set = random_bf16(this->rng_, N * N), a_set = random_bf16(this->rng_, N * N);
    queue_tile(w_set, a_set, 0, false, N);
    this->drv_.run_until_idle();
    queue_tile(w1, a1, 0, true, N);
    int refused = 0, answered = 0;
    for (int cycle = 0; cycle < 6 * N && (cycle == 0 || m.busy_o); ++cycle) {
      m.acc_rd_valid_i = 1;
      m.acc_rd_addr_i = probe;
      this->sim_.eval();
      if (!m.acc_rd_ready_o) ++refused;
      // step() drives the streams and clears acc_rd_valid_i; drive the read for this cycle.
      this->drv_.step_with_read(probe);
      if (m.acc_rd_data_valid_o) {
        ++answered;
        for (int i = 0; i < N; ++i) {
          ASSERT_EQ(get_elem<32>(m.acc_rd_data_o, i), fp::bf16_to_fp32(marker[i])) << "word " << i;
        }
      }
    }
    this->drv_.run_until_idle();
    EXPECT_EQ(refused, probe < 128 ? N : 0)
        << "one refusal per accumulate read of the probe's bank (one per accumulated row)";
    EXPECT_GT(answered, 0);
    // And the accumulated rows are right.
    const auto got_rows = this->drv_.read_acc(0, N);
    std::vector<uint32_t> got;
    for (const auto& r : got_rows) got.insert(got.end(), r.begin(), r.end());
    const auto p0 = reference_matmul(N, N, N, N, a_set, w_set);
    const auto p1 = reference_matmul(N, N, N, N, a1, w1);
    want.assign(p1.size(), 0);
    for (size_t i = 0; i < want.size(); ++i) want[i] = fp::add(p0[i], p1[i]);
    expect_bits_equal(want, got, N);
  }
}

TYPED_TEST(MxuMatmul, WatchdogNamesWhatIsStuck) {
  // A tile start with no weights loaded can never be accepted: the driver's watchdog must end
  // the run with a message naming what is pending, not hang.
  typename TestFixture::Driver::ActRow row{};
  row.first = true;
  this->drv_.push_weight_tile(std::vector<uint16_t>(TestFixture::N * TestFixture::N, 0));
  this->drv_.push_act_row(row);
  this->drv_.push_act_row(row);  // the second tile start waits for a second weight tile
  try {
    this->drv_.run_until_idle(500);
    FAIL() << "run_until_idle returned on a stuck MXU";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("1 activation rows pending"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("a_ready=0"), std::string::npos) << e.what();
  }
}

TEST(MxuMatmulLarge, N128RandomMatmul) {
  constexpr int N = 128;
  SimCtrl<Vtpu_mxu_n128> sim(test::current_test_name());
  mxu::MxuDriver<Vtpu_mxu_n128, N> drv(sim);
  sim.reset();
  std::mt19937_64 rng(test::test_seed());
  const int m = 67, k = N + 9, n = N + 3;  // two K-tiles, two column tiles, rows < N + 1
  const auto a = random_bf16(rng, m * k), w = random_bf16(rng, k * n);
  const auto res = drv.matmul(m, k, n, a, w);
  expect_bits_equal(reference_matmul(N, m, k, n, a, w), res.c, n);
  EXPECT_EQ(res.cycles, tile_sequence_cycles(N, 4, m));
}

}  // namespace
}  // namespace tessera
