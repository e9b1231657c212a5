// MXU simulation speed: the verilated tpu_mxu (array size MXU_N, set at build time) streams
// activation rows through a loaded weight tile with every PE busy each cycle, on one thread.
// Prints one JSON object per line: PE-cycles per CPU-second (median of `reps` runs) and the
// same per wall-second. Built and run by scripts/bench_mxu.sh, once per N.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <vector>

#include "Vtpu_mxu.h"
#include "harness/vl_bits.h"
#include "verilated.h"

namespace {

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void tick(Vtpu_mxu& m) {
  m.clk_i = 1;
  m.eval();
  m.clk_i = 0;
  m.eval();
}

}  // namespace

int main(int argc, char** argv) {
  constexpr int N = MXU_N;
  const long cycles = argc > 1 ? std::atol(argv[1]) : 40000000L / (N * N);  // ~1 s per rep
  const int reps = argc > 2 ? std::atoi(argv[2]) : 7;
  auto ctx = std::make_unique<VerilatedContext>();
  auto m = std::make_unique<Vtpu_mxu>(ctx.get(), "TOP");
  m->clk_i = 0;
  m->w_valid_i = 0;
  m->clear_i = 0;
  m->acc_wr_valid_i = 0;
  m->a_valid_i = 0;
  m->a_accumulate_i = 0;
  m->a_acc_addr_i = 0;
  m->acc_rd_valid_i = 0;
  m->rst_ni = 1;
  m->eval();
  m->rst_ni = 0;
  m->eval();
  tick(*m);
  m->rst_ni = 1;
  // Load one tile of ordinary values (1.0 + small fractions), then stream rows forever.
  for (int k = 0; k < N; ++k) {
    for (int n = 0; n < N; ++n) tessera::put_elem<16>(m->w_row_i, n, 0x3F80 + (k + n) % 64);
    m->w_valid_i = 1;
    tick(*m);
  }
  m->w_valid_i = 0;
  for (int k = 0; k < N; ++k) tessera::put_elem<16>(m->a_row_i, k, 0x3E00 + k % 100);
  m->a_valid_i = 1;
  m->a_first_i = 1;
  tick(*m);
  m->a_first_i = 0;
  // Overwrite the 128 accumulator rows once, then accumulate into them (the read-modify-write
  // path busy too); reading a never-written row would be reported by the memory model.
  m->a_accumulate_i = 0;
  for (uint32_t i = 1; i < 128; ++i) {
    m->a_acc_addr_i = i;
    tick(*m);
  }
  for (int i = 0; i < 2 * N; ++i) tick(*m);
  m->a_accumulate_i = 1;
  std::vector<double> cpu_rates, wall_rates;
  for (int r = 0; r < reps; ++r) {
    const double c0 = thread_cpu_seconds();
    const auto w0 = std::chrono::steady_clock::now();
    for (long i = 0; i < cycles; ++i) {
      m->a_acc_addr_i = static_cast<uint32_t>(i & 127);
      tick(*m);
    }
    const double cpu = thread_cpu_seconds() - c0;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    cpu_rates.push_back(double(N) * N * cycles / cpu);
    wall_rates.push_back(double(N) * N * cycles / wall);
  }
  if (!m->busy_o) {
    std::fprintf(stderr, "bench: the MXU was not busy while streaming\n");
    return 1;
  }
  m->final();
  std::sort(cpu_rates.begin(), cpu_rates.end());
  std::sort(wall_rates.begin(), wall_rates.end());
  std::printf(
      "{\"name\": \"mxu_pe_cycles_per_s\", \"value\": %.0f, \"unit\": \"PE-cycles/CPU-s\", "
      "\"params\": {\"n\": %d, \"cycles\": %ld, \"reps\": %d, \"statistic\": \"median\"}}\n",
      cpu_rates[reps / 2], N, cycles, reps);
  std::printf(
      "{\"name\": \"mxu_pe_cycles_per_wall_s\", \"value\": %.0f, \"unit\": \"PE-cycles/s\", "
      "\"params\": {\"n\": %d, \"cycles\": %ld, \"reps\": %d, \"statistic\": \"median\"}}\n",
      wall_rates[reps / 2], N, cycles, reps);
  std::printf(
      "{\"name\": \"mxu_cycles_per_s\", \"value\": %.0f, \"unit\": \"cycles/CPU-s\", "
      "\"params\": {\"n\": %d}}\n",
      cpu_rates[reps / 2] / (double(N) * N), N);
  return 0;
}
