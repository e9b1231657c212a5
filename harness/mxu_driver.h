// MxuDriver: drives a verilated tpu_mxu through its command interface (docs/architecture.md).
// Weight rows and activation rows wait in two queues and are offered every cycle; the MXU's
// ready signals decide when each is taken, so weight loading overlaps computation exactly as
// the hardware allows. matmul() tiles a whole C = A * W onto the array, runs it and reads the
// result back. A watchdog turns a stuck simulation into an exception that says what was
// still pending.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "harness/sim_ctrl.h"
#include "harness/vl_bits.h"
#include "sw/numerics/mxu_ref.h"

namespace tessera::mxu {

template <class Model, int N>
class MxuDriver {
 public:
  using Row16 = std::array<uint16_t, N>;
  using Row32 = std::array<uint32_t, N>;
  struct ActRow {
    Row16 act;
    bool first;         // first row of a tile: swap to the newly loaded weights
    uint32_t acc_addr;  // accumulator row for the result
    bool accumulate;    // acc += result instead of acc = result
  };
  struct MatmulResult {
    std::vector<uint32_t> c;  // m x n fp32 bits
    uint64_t cycles;          // first weight row accepted .. MXU idle
  };

  // Drives every input idle at once: inputs start random in simulation (even during reset).
  explicit MxuDriver(SimCtrl<Model>& sim) : sim_(sim) {
    Model& m = sim_.top();
    m.w_valid_i = 0;
    m.a_valid_i = 0;
    m.a_first_i = 0;
    m.a_accumulate_i = 0;
    m.a_acc_addr_i = 0;
    m.acc_rd_valid_i = 0;
    m.acc_rd_addr_i = 0;
    m.acc_wr_valid_i = 0;
    m.clear_i = 0;
    m.acc_wr_addr_i = 0;
    sim_.eval();
  }

  // Queues one N x N weight tile: rows k = 0 .. N - 1 of w (row-major, w[k * N + n]).
  void push_weight_tile(const std::vector<uint16_t>& w) {
    for (int k = 0; k < N; ++k) {
      Row16 row;
      for (int n = 0; n < N; ++n) row[n] = w[static_cast<size_t>(k) * N + n];
      weights_.push_back(row);
    }
  }
  void push_act_row(const ActRow& row) { acts_.push_back(row); }
  bool idle_inputs() const { return weights_.empty() && acts_.empty(); }
  void clear_queues() {
    weights_.clear();
    acts_.clear();
  }

  // One cycle: offer the queue heads, take what the MXU accepts, tick the clock.
  void step() { step_with_read(std::nullopt); }

  // step(), also offering a read of accumulator row `read_addr` on the read port.
  void step_with_read(std::optional<uint32_t> read_addr) {
    Model& m = sim_.top();
    m.w_valid_i = !weights_.empty();
    if (!weights_.empty()) {
      for (int i = 0; i < N; ++i) put_elem<16>(m.w_row_i, i, weights_.front()[i]);
    }
    m.a_valid_i = !acts_.empty();
    if (!acts_.empty()) {
      const ActRow& r = acts_.front();
      for (int i = 0; i < N; ++i) put_elem<16>(m.a_row_i, i, r.act[i]);
      m.a_first_i = r.first;
      m.a_acc_addr_i = r.acc_addr;
      m.a_accumulate_i = r.accumulate;
    } else {
      m.a_first_i = 0;
    }
    m.acc_rd_valid_i = read_addr.has_value();
    m.acc_rd_addr_i = read_addr.value_or(0);
    sim_.eval();
    const bool w_fire = m.w_valid_i && m.w_ready_o;
    const bool a_fire = m.a_valid_i && m.a_ready_o;
    sim_.tick();
    if (w_fire) weights_.pop_front();
    if (a_fire) acts_.pop_front();
  }

  // Runs until every queued row is taken and the MXU is idle; returns the cycles that took.
  uint64_t run_until_idle(uint64_t watchdog_cycles = 1000000) {
    uint64_t cycles = 0;
    for (;;) {
      sim_.eval();
      if (idle_inputs() && !sim_.top().busy_o) return cycles;
      if (cycles >= watchdog_cycles) {
        std::ostringstream msg;
        msg << "MXU watchdog: not idle after " << cycles << " cycles (sim cycle " << sim_.cycle()
            << "): " << weights_.size() << " weight rows and " << acts_.size()
            << " activation rows pending, w_ready=" << int(sim_.top().w_ready_o)
            << " a_ready=" << int(sim_.top().a_ready_o) << " busy=" << int(sim_.top().busy_o);
        throw std::runtime_error(msg.str());
      }
      step();
      ++cycles;
    }
  }

  // Reads `count` accumulator rows starting at `addr` through the read port.
  std::vector<Row32> read_acc(uint32_t addr, uint32_t count) {
    Model& m = sim_.top();
    std::vector<Row32> rows;
    uint32_t issued = 0;
    uint64_t guard = 0;
    m.w_valid_i = 0;
    m.a_valid_i = 0;
    while (rows.size() < count) {
      m.acc_rd_valid_i = issued < count;
      m.acc_rd_addr_i = addr + issued;
      sim_.eval();
      const bool fire = m.acc_rd_valid_i && m.acc_rd_ready_o;
      sim_.tick();
      if (fire) ++issued;
      if (m.acc_rd_data_valid_o) {
        Row32 row;
        for (int i = 0; i < N; ++i) row[i] = get_elem<32>(m.acc_rd_data_o, i);
        rows.push_back(row);
      }
      if (++guard > 16ull * count + 64) throw std::runtime_error("MXU read port never answered");
    }
    m.acc_rd_valid_i = 0;
    return rows;
  }

  // C (m x n) = A (m x k) * W (k x n), tiled onto the array: for each N-column tile of W, the
  // K-tiles in order, the first overwriting and the rest accumulating into accumulator rows
  // acc_base + n_tile * m .. + m - 1. Requires (n / N rounded up) * m accumulator rows.
  MatmulResult matmul(int m, int k, int n, const std::vector<uint16_t>& a,
                      const std::vector<uint16_t>& w, uint32_t acc_base = 0) {
    const int k_tiles = ceil_div(k, N), n_tiles = ceil_div(n, N);
    for (int nt = 0; nt < n_tiles; ++nt) {
      for (int kt = 0; kt < k_tiles; ++kt) {
        std::vector<uint16_t> tile(static_cast<size_t>(N) * N, 0);
        for (int r = 0; r < N; ++r) {
          for (int c = 0; c < N; ++c) {
            const int kk = kt * N + r, nn = nt * N + c;
            if (kk < k && nn < n) tile[static_cast<size_t>(r) * N + c] = w[size_t(kk) * n + nn];
          }
        }
        push_weight_tile(tile);
        for (int row = 0; row < m; ++row) {
          ActRow ar{};
          for (int r = 0; r < N; ++r) {
            const int kk = kt * N + r;
            ar.act[r] = kk < k ? a[static_cast<size_t>(row) * k + kk] : 0;
          }
          ar.first = row == 0;
          ar.acc_addr = acc_base + static_cast<uint32_t>(nt * m + row);
          ar.accumulate = kt > 0;
          push_act_row(ar);
        }
      }
    }
    MatmulResult res;
    res.cycles = run_until_idle();
    res.c.assign(static_cast<size_t>(m) * n, 0);
    for (int nt = 0; nt < n_tiles; ++nt) {
      auto rows = read_acc(acc_base + static_cast<uint32_t>(nt * m), static_cast<uint32_t>(m));
      for (int row = 0; row < m; ++row) {
        for (int c = 0; c < N && nt * N + c < n; ++c) {
          res.c[static_cast<size_t>(row) * n + nt * N + c] = rows[row][c];
        }
      }
    }
    return res;
  }

 private:
  SimCtrl<Model>& sim_;
  std::deque<Row16> weights_;
  std::deque<ActRow> acts_;
};

}  // namespace tessera::mxu
