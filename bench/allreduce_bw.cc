// The ring all-reduce alone on a ring of verilated chips (make bench BENCH_ONLY=multichip): the
// example model's gradient vector (fp32, padded) summed over P chips at N = 16, in lock-step
// windows on `threads` host threads. Prints one JSON line: the cycles from the doorbells until
// every chip has halted, the payload bytes each link carried, the achieved bytes per cycle
// against the link's payload peak (32 data bytes per 40-byte flit at 16 bytes a cycle), and
// the wall time. The sums are checked against the host's fp32 additions in the documented
// order, so a fast wrong answer cannot pass.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "Vtpu_top_n16.h"
#include "Vtpu_top_n16___024root.h"  // ChipSim: one evaluation a cycle
#include "Vtpu_top_n16_c2.h"
#include "Vtpu_top_n16_c2___024root.h"  // ChipSim: one evaluation a cycle
#include "harness/chip/ring_sim.h"
#include "sw/numerics/fp_ref.h"
#include "tessera/allreduce.h"
#include "tessera/chip.h"

using namespace tessera;

template <class Model>
int measure(int chips, int threads, uint32_t piece_bytes, int channels) {
  const int n = kFullChip.n;  // the Vtpu_top_n16 chip
  const uint64_t ub_bytes = kFullChip.ub_bytes;
  // the example CNN's gradients: conv kernel 9 x 32 and bias, dense kernel 5408 x 10 and bias
  // (padded to Cpad = 16 at N = 16)
  const uint32_t raw = 9 * 32 + 32 + 10 * 5408 + 16;
  const uint32_t elems = compiler::allreduce_padded_elems(raw, chips, n);
  const uint32_t addr = 0x1000000, prog = 0x2000000;
  chip::RingSim<Model> ring(chips, channels, 32, threads);
  std::mt19937 rng(1);
  // The first all-gather copy from HBM (step 1 on; step 0 leaves with the reduce-scatter's
  // last stores): where the reduce-scatter has ended. None with 2 chips (reported as 0).
  uint32_t gather_pc = 0;
  std::vector<std::vector<uint32_t>> g(chips, std::vector<uint32_t>(elems));
  for (int r = 0; r < chips; ++r) {
    for (auto& x : g[r])
      x = fp::bits(static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 997.0f);
    std::vector<uint8_t> b(4ull * elems);
    std::memcpy(b.data(), g[r].data(), b.size());
    ring.chip(r).hbm_write(addr, b);
    compiler::AllReduceSpec s;
    s.chips = chips;
    s.rank = r;
    s.n = n;
    s.hbm_addr = addr;
    s.elems = elems;
    s.ub_base = 0;
    s.ub_bytes = static_cast<uint32_t>(ub_bytes);
    s.piece_bytes = piece_bytes;
    const auto program = compiler::ring_allreduce_program(s);
    for (size_t k = 0; k < program.size() && r == 0 && !gather_pc; ++k)
      if (program[k].op == isa::Opcode::kDmaCopy && program[k].link != isa::Link::kLocal &&
          program[k].src_space == isa::Space::kHbm && program[k].dst_space == isa::Space::kHbm)
        gather_pc = prog + 16 * static_cast<uint32_t>(k);
    ring.chip(r).hbm_write(prog, isa::encode_program(program));
  }
  const auto t0 = std::chrono::steady_clock::now();
  const chip::RingRun run = ring.run({prog}, 100'000'000, true, 16);
  // Chip 0's decode PC reaches the all-gather when its last reduce-scatter instruction has been
  // dispatched: a lower bound of the reduce-scatter's end, good to a few hundred cycles.
  uint64_t rs_cycles = 0;
  for (const auto& smp : ring.samples(0))
    if (gather_pc && smp.pc <= gather_pc) rs_cycles = smp.cycle;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!run.error.empty()) {
    std::fprintf(stderr, "allreduce_bw: %s\n", run.error.c_str());
    return 1;
  }
  const uint32_t chunk = elems / static_cast<uint32_t>(chips);
  for (int r = 0; r < chips; ++r) {
    const auto got = ring.chip(r).hbm_read(addr, 4ull * elems);
    for (uint32_t i = 0; i < elems; ++i) {
      const int c = static_cast<int>(i / chunk);
      uint32_t s = g[c][i];
      for (int k = 1; k < chips; ++k) s = fp::add(s, g[(c + k) % chips][i]);
      uint32_t v;
      std::memcpy(&v, &got[4ull * i], 4);
      if (v != s) {
        std::fprintf(stderr, "allreduce_bw: chip %d element %u wrong\n", r, i);
        return 1;
      }
    }
  }
  const double payload = 2.0 * (chips - 1) * chunk * 4;  // bytes each link carries
  const double peak = 32.0 / 3.0;
  std::printf(
      "{\"chips\": %d, \"channels\": %d, \"n\": %d, \"elems\": %u, \"threads\": %d, "
      "\"piece_bytes\": %u, "
      "\"cycles\": %llu, \"link_payload_bytes\": %.0f, \"bytes_per_cycle\": %.4f, "
      "\"link_peak_bytes_per_cycle\": %.4f, \"fraction_of_peak\": %.4f, \"flits\": %llu, "
      "\"reduce_scatter_cycles\": %llu, \"wall_seconds\": %.3f}\n",
      chips, channels, n, elems, threads, piece_bytes, static_cast<unsigned long long>(run.cycles),
      payload, payload / run.cycles, peak, payload / run.cycles / peak,
      static_cast<unsigned long long>(run.flits), static_cast<unsigned long long>(rs_cycles), wall);
  return 0;
}

// allreduce_bw [chips] [threads] [piece bytes] [HBM pseudo-channels per chip: 1 or 2]
int main(int argc, char** argv) {
  const int chips = argc > 1 ? std::atoi(argv[1]) : 2;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const uint32_t piece_bytes = argc > 3 ? static_cast<uint32_t>(std::atoi(argv[3])) : 0;
  const int channels = argc > 4 ? std::atoi(argv[4]) : 1;
  if (channels == 2) return measure<Vtpu_top_n16_c2>(chips, threads, piece_bytes, 2);
  return measure<Vtpu_top_n16>(chips, threads, piece_bytes, 1);
}
