// tpu_mxu_unit (MXU.LDW / MXU.MM on a tpu_mxu) at N = 4 (four rows per UB word), N = 16 (one
// row per word) and N = 32 (two words per row) against the architectural reference: a C++
// unified-buffer model (random bf16 with occasional specials, random grants, read data the
// cycle after the grant) serves the unit's two UB read ports (weight rows, activation rows);
// programs of LDW, MM (overwrite), LDW, MM (accumulate into the same rows) with random addresses,
// positive, zero and negative strides and 1 .. 3N rows run back to back, and every touched
// accumulator row is read back through the read port and compared bit for bit with
// sw/numerics/mxu_ref's order (accumulate = fp32 RNE add of the new sum to the old row). Also: the
// external accumulator write port (writes land, are read back and accumulated onto, and yield
// exactly once per array result written), idle_o low until the last result is written, activation
// rows per cycle of a long MM and of tiles back to back (a tile loads beside the stream), and five
// tiles loaded before their MMs (the most the unit queues).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "Vtpu_mxu_unit_n16.h"
#include "Vtpu_mxu_unit_n32.h"
#include "Vtpu_mxu_unit_n4.h"
#include "harness/sim_ctrl.h"
#include "harness/vl_bits.h"
#include "sw/numerics/fp_ref.h"
#include "sw/numerics/mxu_ref.h"
#include "tessera/isa_gen.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

constexpr int kUbWordBytes = 32;

template <class M, int Dim, int UbBytes, int AccRows>
struct Config {
  using Model = M;
  static constexpr int N = Dim;
  static constexpr int kUbBytes = UbBytes;
  static constexpr int kAccRows = AccRows;
};
using Configs = ::testing::Types<Config<Vtpu_mxu_unit_n4, 4, 8192, 64>,
                                 Config<Vtpu_mxu_unit_n16, 16, 65536, 256>,
                                 Config<Vtpu_mxu_unit_n32, 32, 65536, 128>>;
struct ConfigNames {
  template <class T>
  static std::string GetName(int) {
    return "N" + std::to_string(T::N);
  }
};

struct Instr {
  std::array<uint32_t, 4> w;
};
Instr ldw(uint32_t addr, int32_t stride, bool transpose = false) {
  return {{isa::OP_MXU_LDW | (transpose ? 1u << 8 : 0u), addr, static_cast<uint32_t>(stride), 0}};
}
Instr mm(bool accumulate, uint32_t addr, int32_t stride, uint32_t rows, uint32_t acc_row) {
  return {{isa::OP_MXU_MM | (accumulate ? 1u << 8 : 0u), addr, static_cast<uint32_t>(stride),
           rows | (acc_row << 16)}};
}

// The unit, a UB model on its read port, the accumulator ports, and the reference state.
template <class Cfg>
class MxuUnitBench {
 public:
  static constexpr int N = Cfg::N;
  using Model = typename Cfg::Model;
  using Row32 = std::array<uint32_t, N>;

  MxuUnitBench(SimCtrl<Model>& sim, uint64_t seed) : sim_(sim), rng_(seed), ub_(Cfg::kUbBytes) {
    Model& m = sim_.top();
    m.instr_valid_i = 0;
    for (int i = 0; i < 4; ++i) put_elem<32>(m.instr_i, i, 0);
    m.w_ub_gnt_i = 0;
    m.w_ub_rvalid_i = 0;
    m.a_ub_gnt_i = 0;
    m.a_ub_rvalid_i = 0;
    for (int i = 0; i < kUbWordBytes / 4; ++i) {
      put_elem<32>(m.w_ub_rdata_i, i, 0);
      put_elem<32>(m.a_ub_rdata_i, i, 0);
    }
    m.acc_rd_valid_i = 0;
    m.acc_rd_addr_i = 0;
    m.acc_wr_valid_i = 0;
    m.clear_i = 0;
    m.acc_wr_addr_i = 0;
    for (int i = 0; i < N; ++i) put_elem<32>(m.acc_wr_data_i, i, 0);
    sim_.eval();
    // UB contents: training-like bf16 values, 1 in 64 a special (zeros, subnormals, inf, NaN).
    const auto specials = test::bf16_specials();
    for (size_t i = 0; i + 1 < ub_.size(); i += 2) {
      uint16_t v;
      if (rng_() % 64 == 0) {
        v = specials[rng_() % specials.size()];
      } else {
        v = static_cast<uint16_t>((rng_() & 0x807F) | ((121 + rng_() % 11) << 7));
      }
      ub_[i] = static_cast<uint8_t>(v);
      ub_[i + 1] = static_cast<uint8_t>(v >> 8);
    }
  }

  std::mt19937_64& rng() { return rng_; }
  void set_grant_percent(int p) { grant_pct_ = p; }
  void set_instr_gaps(bool on) { instr_gaps_ = on; }
  // While on, the external write port is offered a write every cycle (rows ext_lo ..
  // ext_lo + ext_count - 1, random data).
  void set_ext_stream(bool on, uint32_t ext_lo = 0, uint32_t ext_count = 1) {
    ext_stream_ = on;
    ext_lo_ = ext_lo;
    ext_count_ = ext_count;
  }

  // While on, the read port is offered a read every cycle (rows rd_lo .. rd_lo + rd_count - 1,
  // rows the instructions leave alone): each returned row is checked against the reference.
  void set_read_stream(bool on, uint32_t rd_lo = 0, uint32_t rd_count = 1) {
    rd_stream_ = on;
    rd_lo_ = rd_lo;
    rd_count_ = rd_count;
  }

  void push(const Instr& ins) { instrs_.push_back(ins); }
  void push_ext_write(uint32_t row, const Row32& data) { ext_writes_.push_back({row, data}); }

  uint16_t ub_bf16(uint32_t addr) const {
    return static_cast<uint16_t>(ub_[addr] | (ub_[addr + 1] << 8));
  }

  // A random 2N-aligned stride of -4 .. 4 rows and a row-0 address that keeps every row inside
  // the UB (the sequencer's range check).
  int32_t random_stride() { return (static_cast<int32_t>(rng_() % 9) - 4) * 2 * N; }
  uint32_t random_addr(int rows, int32_t stride) {
    const int64_t span = static_cast<int64_t>(rows - 1) * stride;
    const int64_t first = -std::min<int64_t>(0, span);
    const int64_t last = Cfg::kUbBytes - 2 * N - std::max<int64_t>(0, span);
    const int64_t slots = (last - first) / (2 * N) + 1;
    return static_cast<uint32_t>(first + static_cast<int64_t>(rng_() % slots) * 2 * N);
  }

  // 32-bit part i of the UB word a read granted last cycle returns (junk without one).
  uint32_t ub_word_part(const std::optional<uint32_t>& word, int i) {
    if (!word) return static_cast<uint32_t>(rng_());
    const size_t b = static_cast<size_t>(*word) * kUbWordBytes + 4 * i;
    return ub_[b] | (ub_[b + 1] << 8) | (ub_[b + 2] << 16) | (uint32_t(ub_[b + 3]) << 24);
  }
  // A port's grant this cycle: random at grant_pct_ percent, each port on its own.
  bool grant(bool req, uint32_t addr, const char* port) {
    if (req && addr >= static_cast<uint32_t>(Cfg::kUbBytes / kUbWordBytes)) {
      ADD_FAILURE() << port << " UB word " << addr << " outside the UB at cycle " << cycle_;
    }
    return req && static_cast<int>(rng_() % 100) < grant_pct_;
  }

  // One cycle: offer the instruction, the UB's answers and grants, the external write; tick.
  void step() {
    Model& m = sim_.top();
    if (!instrs_.empty() && !offered_) offered_ = !instr_gaps_ || rng_() % 4 != 0;
    m.instr_valid_i = offered_;
    for (int i = 0; i < 4; ++i) put_elem<32>(m.instr_i, i, offered_ ? instrs_.front().w[i] : 0);
    m.w_ub_rvalid_i = pending_w_read_.has_value();
    m.a_ub_rvalid_i = pending_a_read_.has_value();
    for (int i = 0; i < kUbWordBytes / 4; ++i) {
      put_elem<32>(m.w_ub_rdata_i, i, ub_word_part(pending_w_read_, i));
      put_elem<32>(m.a_ub_rdata_i, i, ub_word_part(pending_a_read_, i));
    }
    if (ext_stream_ && ext_writes_.empty()) {
      Row32 d;
      for (auto& x : d) x = static_cast<uint32_t>(rng_());
      ext_writes_.push_back({ext_lo_ + static_cast<uint32_t>(rng_() % ext_count_), d});
    }
    m.acc_wr_valid_i = !ext_writes_.empty();
    if (!ext_writes_.empty()) {
      m.acc_wr_addr_i = ext_writes_.front().first;
      for (int i = 0; i < N; ++i) put_elem<32>(m.acc_wr_data_i, i, ext_writes_.front().second[i]);
    }
    const uint32_t rd_row = rd_lo_ + static_cast<uint32_t>(rng_() % rd_count_);
    m.acc_rd_valid_i = rd_stream_;
    m.acc_rd_addr_i = rd_stream_ ? rd_row : 0;
    m.w_ub_gnt_i = 0;
    m.a_ub_gnt_i = 0;
    sim_.eval();
    idle_log_.push_back(m.idle_o);
    rd_idle_log_.push_back(m.rd_idle_o);
    if (m.w_ub_rvalid_i || m.a_ub_rvalid_i) last_ub_data_ = cycle_;
    const uint32_t w_addr = m.w_ub_addr_o, a_addr = m.a_ub_addr_o;
    const bool w_gnt = grant(m.w_ub_req_o, w_addr, "weight");
    const bool a_gnt = grant(m.a_ub_req_o, a_addr, "activation");
    m.w_ub_gnt_i = w_gnt;
    m.a_ub_gnt_i = a_gnt;
    sim_.eval();
    const bool instr_fire = m.instr_valid_i && m.instr_ready_o;
    const bool wr_fire = m.acc_wr_valid_i && m.acc_wr_ready_o;
    if (m.acc_wr_valid_i && !m.acc_wr_ready_o) ++wr_refused_;
    const bool rd_fire = m.acc_rd_valid_i && m.acc_rd_ready_o;
    if (m.acc_rd_valid_i && !m.acc_rd_ready_o) ++rd_refused_;
    if (m.mac_row_o) {
      if (macs_ == 0) first_mac_ = cycle_;
      last_mac_ = cycle_;
      ++macs_;
    }
    sim_.tick();
    if (rd_fire != static_cast<bool>(m.acc_rd_data_valid_o)) {
      ADD_FAILURE() << "read data valid " << int(m.acc_rd_data_valid_o) << " after a read fire "
                    << rd_fire << " at cycle " << cycle_;
    } else if (rd_fire) {
      const Row32& want = acc_ref_.at(rd_row);
      for (int i = 0; i < N; ++i)
        if (get_elem<32>(m.acc_rd_data_o, i) != want[i]) {
          ADD_FAILURE() << "ACC[" << rd_row << "][" << i << "] read at cycle " << cycle_
                        << ": want " << fp::hex32(want[i]) << " got "
                        << fp::hex32(get_elem<32>(m.acc_rd_data_o, i));
          break;
        }
      ++rd_checked_;
    }
    pending_w_read_ = w_gnt ? std::optional<uint32_t>(w_addr) : std::nullopt;
    pending_a_read_ = a_gnt ? std::optional<uint32_t>(a_addr) : std::nullopt;
    if (instr_fire) {
      if (!first_instr_) first_instr_ = cycle_;
      execute_reference(instrs_.front());
      instrs_.pop_front();
      offered_ = false;
    }
    if (wr_fire) {
      acc_ref_[ext_writes_.front().first] = ext_writes_.front().second;
      ext_writes_.pop_front();
    }
    ++cycle_;
  }

  // Steps until every instruction is taken and idle_o is high; returns the cycles taken.
  uint64_t run_until_idle(uint64_t watchdog = 200000) {
    for (uint64_t c = 0;; ++c) {
      sim_.eval();
      if (instrs_.empty() && !offered_ && (ext_writes_.empty() || ext_stream_) &&
          sim_.top().idle_o) {
        return c;
      }
      if (c >= watchdog) {
        std::ostringstream msg;
        msg << "MXU unit watchdog: not idle after " << c << " cycles, " << instrs_.size()
            << " instructions pending, instr_ready=" << int(sim_.top().instr_ready_o)
            << " w_ub_req=" << int(sim_.top().w_ub_req_o)
            << " a_ub_req=" << int(sim_.top().a_ub_req_o);
        throw std::runtime_error(msg.str());
      }
      step();
    }
  }

  // Reads accumulator rows through the read port, one request per cycle.
  std::vector<Row32> read_acc(const std::vector<uint32_t>& rows) {
    Model& m = sim_.top();
    std::vector<Row32> out;
    size_t issued = 0;
    m.instr_valid_i = 0;
    m.acc_wr_valid_i = 0;
    m.w_ub_gnt_i = 0;
    m.w_ub_rvalid_i = 0;
    m.a_ub_gnt_i = 0;
    m.a_ub_rvalid_i = 0;
    for (uint64_t guard = 0; out.size() < rows.size(); ++guard) {
      if (guard > 4 * rows.size() + 16) throw std::runtime_error("acc read port never answered");
      m.acc_rd_valid_i = issued < rows.size();
      m.acc_rd_addr_i = issued < rows.size() ? rows[issued] : 0;
      sim_.eval();
      idle_log_.push_back(m.idle_o);
      rd_idle_log_.push_back(m.rd_idle_o);
      const bool fire = m.acc_rd_valid_i && m.acc_rd_ready_o;
      sim_.tick();
      ++cycle_;
      if (fire) ++issued;
      if (m.acc_rd_data_valid_o) {
        Row32 r;
        for (int i = 0; i < N; ++i) r[i] = get_elem<32>(m.acc_rd_data_o, i);
        out.push_back(r);
      }
    }
    m.acc_rd_valid_i = 0;
    return out;
  }

  // Reads every accumulator row the reference knows and compares bit for bit.
  void check_acc() {
    std::vector<uint32_t> rows;
    for (const auto& [r, v] : acc_ref_) rows.push_back(r);
    const auto got = read_acc(rows);
    int bad = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row32& want = acc_ref_.at(rows[i]);
      for (int c = 0; c < N; ++c) {
        if (want[c] != got[i][c] && ++bad <= 8) {
          ADD_FAILURE() << "ACC[" << rows[i] << "][" << c << "]: want " << fp::hex32(want[c])
                        << " (" << fp::f32(want[c]) << ") got " << fp::hex32(got[i][c]) << " ("
                        << fp::f32(got[i][c]) << ")";
        }
      }
    }
    EXPECT_EQ(bad, 0) << bad << " of " << rows.size() * N << " accumulator words differ";
  }

  uint64_t cycle() const { return cycle_; }
  uint64_t macs() const { return macs_; }
  uint64_t first_mac() const { return first_mac_; }
  uint64_t last_mac() const { return last_mac_; }
  uint64_t wr_refused() const { return wr_refused_; }
  uint64_t rd_refused() const { return rd_refused_; }
  uint64_t rd_checked() const { return rd_checked_; }
  std::optional<uint64_t> first_instr() const { return first_instr_; }
  const std::vector<bool>& idle_log() const { return idle_log_; }
  const std::vector<bool>& rd_idle_log() const { return rd_idle_log_; }
  uint64_t last_ub_data() const { return last_ub_data_; }  // the last UB word returned
  void reset_counters() {
    macs_ = 0;
    wr_refused_ = 0;
    rd_refused_ = 0;
    rd_checked_ = 0;
    first_instr_.reset();
  }

 private:
  // Program order: an LDW reads its tile now (the UB does not change during a test), an MM
  // uses the oldest unused tile and updates the reference accumulator rows.
  void execute_reference(const Instr& ins) {
    const uint32_t op = ins.w[0] & 0xFF;
    const uint32_t addr = ins.w[1];
    const int32_t stride = static_cast<int32_t>(ins.w[2]);
    if (op == isa::OP_MXU_LDW) {
      // W[k][n] = row k's element n, or transposed row n's element k
      const bool transpose = (ins.w[0] >> 8) & 1;
      std::vector<uint16_t> tile(static_cast<size_t>(N) * N);
      for (int k = 0; k < N; ++k) {
        for (int n = 0; n < N; ++n)
          tile[k * N + n] =
              transpose ? ub_bf16(addr + n * stride + 2 * k) : ub_bf16(addr + k * stride + 2 * n);
      }
      tiles_.push_back(tile);
      return;
    }
    ASSERT_EQ(op, isa::OP_MXU_MM);
    ASSERT_FALSE(tiles_.empty()) << "test bug: MM without a tile";
    const auto tile = tiles_.front();
    tiles_.pop_front();
    const bool accumulate = (ins.w[0] >> 8) & 1;
    const uint32_t rows = ins.w[3] & 0xFFFF, acc_row = ins.w[3] >> 16;
    for (uint32_t t = 0; t < rows; ++t) {
      std::vector<uint16_t> a(N);
      for (int k = 0; k < N; ++k) a[k] = ub_bf16(addr + static_cast<int32_t>(t) * stride + 2 * k);
      const auto sum = mxu::reference_matmul(N, 1, N, N, a, tile);
      Row32& acc = acc_ref_[acc_row + t];
      if (accumulate) {
        for (int c = 0; c < N; ++c) acc[c] = fp::add(acc[c], sum[c]);
      } else {
        for (int c = 0; c < N; ++c) acc[c] = sum[c];
      }
    }
  }

  SimCtrl<Model>& sim_;
  std::mt19937_64 rng_;
  std::vector<uint8_t> ub_;
  int grant_pct_ = 100;
  bool instr_gaps_ = false;
  bool ext_stream_ = false;
  uint32_t ext_lo_ = 0, ext_count_ = 1;
  bool rd_stream_ = false;
  uint32_t rd_lo_ = 0, rd_count_ = 1;
  uint64_t rd_refused_ = 0, rd_checked_ = 0;
  std::deque<Instr> instrs_;
  bool offered_ = false;
  std::deque<std::pair<uint32_t, Row32>> ext_writes_;
  std::optional<uint32_t> pending_w_read_, pending_a_read_;
  std::deque<std::vector<uint16_t>> tiles_;
  std::map<uint32_t, Row32> acc_ref_;
  uint64_t cycle_ = 0, macs_ = 0, first_mac_ = 0, last_mac_ = 0, wr_refused_ = 0;
  std::optional<uint64_t> first_instr_;
  std::vector<bool> idle_log_, rd_idle_log_;
  uint64_t last_ub_data_ = 0;
};

template <class Cfg>
class MxuUnit : public ::testing::Test {
 protected:
  static constexpr int N = Cfg::N;
  MxuUnit() : sim_(test::current_test_name()), bench_(sim_, test::test_seed()) { sim_.reset(); }

  SimCtrl<typename Cfg::Model> sim_;
  MxuUnitBench<Cfg> bench_;
};
TYPED_TEST_SUITE(MxuUnit, Configs, ConfigNames);

TYPED_TEST(MxuUnit, RandomProgramsMatchReference) {
  constexpr int N = TestFixture::N;
  constexpr int kAccRows = TypeParam::kAccRows;
  auto& b = this->bench_;
  auto& rng = b.rng();
  for (int grant : {100, 60, 25}) {
    SCOPED_TRACE("grant percent " + std::to_string(grant));
    b.set_grant_percent(grant);
    b.set_instr_gaps(grant != 100);
    for (int group = 0; group < 6; ++group) {
      // LDW, MM set, LDW, MM acc into the same rows; half the time both tiles are loaded first;
      // each tile transposed (MXU.LDW ..., t) half the time.
      const int rows = 1 + static_cast<int>(rng() % (3 * N));
      const uint32_t acc_row = static_cast<uint32_t>(rng() % (kAccRows - rows + 1));
      const int32_t s1 = b.random_stride(), s2 = b.random_stride();
      const int32_t ws1 = b.random_stride(), ws2 = b.random_stride();
      const Instr l1 = ldw(b.random_addr(N, ws1), ws1, rng() % 2),
                  l2 = ldw(b.random_addr(N, ws2), ws2, rng() % 2);
      const Instr m1 = mm(false, b.random_addr(rows, s1), s1, rows, acc_row);
      const Instr m2 = mm(true, b.random_addr(rows, s2), s2, rows, acc_row);
      if (rng() % 2) {
        for (const Instr& i : {l1, m1, l2, m2}) b.push(i);
      } else {
        for (const Instr& i : {l1, l2, m1, m2}) b.push(i);
      }
    }
    b.run_until_idle();
    b.check_acc();
  }
}

TYPED_TEST(MxuUnit, LongMatmulRowsPerCycle) {
  constexpr int N = TestFixture::N;
  constexpr int kAccRows = TypeParam::kAccRows;
  auto& b = this->bench_;
  // One tile, then an MM of every accumulator row (stride one row), the UB granting always.
  b.push(ldw(b.random_addr(N, 2 * N), 2 * N));
  b.push(mm(false, b.random_addr(kAccRows, 2 * N), 2 * N, kAccRows, 0));
  const uint64_t cycles = b.run_until_idle();
  ASSERT_EQ(b.macs(), static_cast<uint64_t>(kAccRows));
  const double rate = double(b.macs()) / double(b.last_mac() - b.first_mac() + 1);
  const int words_per_row = std::max(1, 2 * N / kUbWordBytes);
  std::printf(
      "[ measure  ] N=%d MM of %d rows: %.3f rows/cycle (first to last row), LDW+MM "
      "%llu cycles to idle\n",
      N, kAccRows, rate, static_cast<unsigned long long>(cycles));
  // One row per words_per_row cycles, no bubbles. With rows of several words, the rows read
  // ahead while the tile loads (the row FIFO's 4) enter one per cycle before that rate sets in.
  const uint64_t span = b.last_mac() - b.first_mac();
  if (words_per_row == 1) {
    EXPECT_EQ(span, static_cast<uint64_t>(kAccRows - 1)) << "one row per cycle, no bubbles";
  } else {
    EXPECT_LE(span, static_cast<uint64_t>((kAccRows - 1) * words_per_row));
    EXPECT_GE(span, static_cast<uint64_t>((kAccRows - 1 - 4) * words_per_row));
  }
  b.check_acc();
  // Several tiles back to back: each tile's weights load on their own UB port while the previous
  // tile's rows stream, so tiles of T >= N + 1 rows follow each other without a gap.
  b.reset_counters();
  const int rows = kAccRows / 4;
  for (int t = 0; t < 4; ++t) {
    b.push(ldw(b.random_addr(N, 2 * N), 2 * N));
    b.push(mm(t > 0, b.random_addr(rows, 2 * N), 2 * N, rows, 0));
  }
  const uint64_t cycles4 = b.run_until_idle();
  const uint64_t span4 = b.last_mac() - b.first_mac();
  std::printf(
      "[ measure  ] N=%d 4 x (LDW + MM of %d rows): %.3f rows/cycle first to last row, %llu "
      "cycles to idle\n",
      N, rows, double(b.macs()) / double(span4 + 1), static_cast<unsigned long long>(cycles4));
  if (words_per_row == 1) {
    ASSERT_GE(rows, N + 1);
    EXPECT_EQ(span4, static_cast<uint64_t>(4 * rows - 1)) << "tiles back to back, no bubbles";
  }
  b.check_acc();
}

TYPED_TEST(MxuUnit, ExternalAccWritesLandAndYield) {
  constexpr int N = TestFixture::N;
  constexpr int kAccRows = TypeParam::kAccRows;
  auto& b = this->bench_;
  auto& rng = b.rng();
  // 1. With the array idle, every write is taken at once and reads back.
  for (int r = 0; r < N; ++r) {
    typename MxuUnitBench<TypeParam>::Row32 d;
    for (auto& x : d) x = static_cast<uint32_t>(rng()) & 0xBFFFFFFFu;  // finite values
    b.push_ext_write(static_cast<uint32_t>(r), d);
  }
  b.run_until_idle();
  EXPECT_EQ(b.wr_refused(), 0u);
  b.check_acc();
  // 2. An MM accumulating onto those rows while the port writes other rows every cycle: it
  //    refuses exactly once per array result written, and both land.
  b.reset_counters();
  const int rows = N;
  b.set_ext_stream(true, kAccRows / 2, kAccRows / 2);
  b.push(ldw(b.random_addr(N, 2 * N), 2 * N));
  b.push(mm(true, b.random_addr(rows, -2 * N), -2 * N, rows, 0));
  b.run_until_idle();
  b.set_ext_stream(false);
  EXPECT_EQ(b.wr_refused(), static_cast<uint64_t>(rows));
  b.check_acc();
  // 3. Same with random grants and a longer overwrite MM.
  b.reset_counters();
  b.set_grant_percent(50);
  b.set_ext_stream(true, 3 * N + 1, kAccRows - 3 * N - 1);  // rows the MM does not write
  b.push(ldw(b.random_addr(N, 2 * N), 2 * N));
  b.push(mm(false, b.random_addr(3 * N, 2 * N), 2 * N, 3 * N, 1));
  b.run_until_idle();
  b.set_ext_stream(false);
  EXPECT_EQ(b.wr_refused(), static_cast<uint64_t>(3 * N));
  b.check_acc();
}

// The accumulator is two banks, the halves of its rows: a read of one half runs beside an
// accumulating matmul in the other (never refused); a read of the matmul's half yields to the
// accumulate path's read once per row.
TYPED_TEST(MxuUnit, AccReadsBesideAnAccumulatingMatmul) {
  constexpr int N = TestFixture::N;
  constexpr int kAccRows = TypeParam::kAccRows;
  constexpr uint32_t kHalf = kAccRows / 2;
  auto& b = this->bench_;
  auto& rng = b.rng();
  const uint32_t rows = N;  // 2 rows <= kHalf in every configuration
  static_assert(2 * N <= kHalf);
  // rows [0, 2 rows) of the low half and [0, rows) of the high half hold known values
  for (uint32_t r : {0u, kHalf})
    for (uint32_t i = 0; i < (r ? rows : 2 * rows); ++i) {
      typename MxuUnitBench<TypeParam>::Row32 d;
      for (auto& x : d) x = static_cast<uint32_t>(rng()) & 0xBFFFFFFFu;  // finite values
      b.push_ext_write(r + i, d);
    }
  b.run_until_idle();
  for (const bool other_half : {true, false}) {
    SCOPED_TRACE(other_half ? "reads of the other half" : "reads of the matmul's half");
    b.reset_counters();
    b.set_read_stream(true, other_half ? kHalf : rows, rows);
    b.push(ldw(b.random_addr(N, 2 * N), 2 * N));
    b.push(mm(true, b.random_addr(rows, 2 * N), 2 * N, rows, 0));
    b.run_until_idle();
    b.set_read_stream(false);
    EXPECT_EQ(b.rd_refused(), other_half ? 0u : uint64_t{rows});
    EXPECT_GT(b.rd_checked(), uint64_t{rows});
    b.check_acc();
  }
}

TYPED_TEST(MxuUnit, IdleLowUntilLastResultWritten) {
  constexpr int N = TestFixture::N;
  auto& b = this->bench_;
  const int rows = N + 3;
  b.push(ldw(b.random_addr(N, 2 * N), 2 * N));
  b.push(mm(false, b.random_addr(rows, 2 * N), 2 * N, rows, 2));
  const uint64_t start = b.cycle();
  b.run_until_idle();
  ASSERT_TRUE(b.first_instr().has_value());
  const auto& log = b.idle_log();
  // The last row is accepted in cycle s and written at the end of s + 2N - 1: idle_o is low
  // from the cycle after the first instruction is taken through s + 2N - 1, high at s + 2N.
  const uint64_t idle_at = b.last_mac() + 2 * N;
  for (uint64_t c = *b.first_instr() + 1; c < b.cycle(); ++c) {
    ASSERT_EQ(log[c], c >= idle_at)
        << "idle_o at cycle " << c << " (start " << start << ", last row " << b.last_mac() << ")";
  }
  EXPECT_EQ(b.cycle(), idle_at) << "run_until_idle stops the first idle cycle";
  b.check_acc();
}

// rd_idle_o (what SIGNAL ..., reads waits for) is low while any UB word of the LDW and the MM
// is still to come, and rises the cycle after the last row enters the array — 2N - 1 cycles
// before idle_o, while the array still computes.
TYPED_TEST(MxuUnit, ReadIdleRisesWhenTheRowsAreReadBeforeTheArrayDrains) {
  constexpr int N = TestFixture::N;
  auto& b = this->bench_;
  b.set_grant_percent(60);
  const int rows = 2 * N + 5;
  b.push(ldw(b.random_addr(N, 2 * N), 2 * N));
  b.push(mm(false, b.random_addr(rows, 2 * N), 2 * N, rows, 1));
  b.run_until_idle();
  ASSERT_TRUE(b.first_instr().has_value());
  const auto& rd = b.rd_idle_log();
  for (uint64_t c = *b.first_instr() + 1; c < b.cycle(); ++c)
    ASSERT_EQ(rd[c], c > b.last_mac()) << "rd_idle_o at cycle " << c << " (last row "
                                        << b.last_mac() << ", last UB word " << b.last_ub_data()
                                        << ")";
  EXPECT_GT(b.last_mac(), b.last_ub_data()) << "a row entered the array before its word came";
  EXPECT_EQ(b.cycle(), b.last_mac() + 2 * N) << "idle_o rises 2N - 1 cycles after rd_idle_o";
  b.check_acc();
}

// `tiles` LDWs (tile t transposed where transposed(t)) before their MMs; each MM must use its
// own tile.
template <class Bench>
void tiles_before_matmuls(Bench& b, int n, int acc_rows, int tiles,
                          const std::function<bool(int)>& transposed) {
  b.set_grant_percent(70);
  const int rows = 1 + n / 2;
  for (int t = 0; t < tiles; ++t) {
    const int32_t s = b.random_stride();
    b.push(ldw(b.random_addr(n, s), s, transposed(t)));
  }
  for (int t = 0; t < tiles; ++t) {
    const int32_t s = b.random_stride();
    b.push(mm(t % 2 == 1, b.random_addr(rows, s), s, rows,
              static_cast<uint32_t>((t / 2) * rows) % (acc_rows - rows)));
  }
  b.run_until_idle();
  b.check_acc();
}

TYPED_TEST(MxuUnit, FiveTilesLoadedBeforeTheirMatmuls) {
  // The most unused plain tiles the unit takes before an MM (LdwDepth + 1 = 5): one loads into
  // the shadow bank, one waits on the weight port, three queue.
  SCOPED_TRACE("tiles 0, 2, 4 transposed: a plain tile's rows wait behind a transposed one");
  tiles_before_matmuls(this->bench_, TestFixture::N, TypeParam::kAccRows, 5,
                       [](int t) { return t % 2 == 0; });
}

TYPED_TEST(MxuUnit, SixTilesWhenTheSecondIsTransposed) {
  // Tiles 1 and 3 transposed: the transpose buffer holds a whole tile while the shadow bank is
  // full; with tile 1 transposed the unit takes one tile more than with plain ones.
  tiles_before_matmuls(this->bench_, TestFixture::N, TypeParam::kAccRows, 5,
                       [](int t) { return t % 2 == 1; });
  tiles_before_matmuls(this->bench_, TestFixture::N, TypeParam::kAccRows, 6,
                       [](int t) { return t == 1; });
}

}  // namespace
}  // namespace tessera
