// The GEMM benchmark (make bench BENCH_ONLY=gemm; docs/performance.md, "GEMM"):
// C[M][Nc] (fp32) = A[M][K] (bf16) x B[K][Nc] (bf16), HBM to HBM, compiled by the step
// compiler's tiled matmul (sw/compiler/matmul_lowering.h: row blocks and column groups in the
// ACC, the contraction double-buffered in the UB, the epilogue storing fp32 rows) and run on the
// rtl chip. Utilization = M K Nc / (N^2 x cycles from the doorbell to HALT). Every result is
// checked: the rtl chip's C equals the functional model's bit for bit, and each element lies
// within the fp32 summation bound of the exact (double) product of the bf16 operands.
//
//   gemm_bench N M K Nc [arith] [name] [pseudo-channels]
//     (N = 16: the rtl chip; arith rtl | host, default host; 1 pseudo-channel, or 2: the chip
//     built with two, arith rtl)
//
// Prints one JSON object: name, N, M, K, Nc, cycles, MACs, utilization, instructions (stored
// and executed), HBM bytes, the tiling, wall seconds.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sw/compiler/matmul_lowering.h"
#include "sw/compiler/reroll.h"
#include "tessera/driver.h"
#include "tessera/isa.h"
#include "tessera/isa_gen.h"

namespace {

using namespace tessera;
using namespace tessera::compiler::lowering;

// Deterministic operands: small integers times powers of two keep the bf16 values exact and the
// sums far from cancelling to zero.
uint16_t operand(uint64_t i, uint32_t salt) {
  uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ salt;
  z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
  const float v = static_cast<float>(static_cast<int>(z >> 59) - 16) / 16.0f;
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return static_cast<uint16_t>(bits >> 16);  // exact: a 5-bit integer over 16
}

float bf16_value(uint16_t h) {
  const uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

struct Program {
  std::vector<uint8_t> bytes;
  uint64_t stored = 0, executed = 0, hbm_bytes = 0;
  std::string tiling;
};

// The GEMM's program for operands at a, w and the result at c (addresses in HBM).
Program compile(const ChipShape& chip, uint32_t M, uint32_t Kt, uint32_t Ct, uint64_t a,
                uint64_t w, uint64_t c) {
  compiler::ProgramBuilder b(chip.n, chip.ub_bytes, chip.acc_rows);
  Program p;
  p.tiling = emit_gemm(b, M, Kt, Ct, a, w, c, chip.ub_bytes, chip.acc_rows);
  p.hbm_bytes = b.stats().hbm_bytes;
  const std::vector<isa::Instruction> straight = b.finish();
  const std::vector<isa::Instruction> prog = compiler::reroll(straight);
  p.stored = prog.size();
  p.executed = straight.size();
  p.bytes = isa::encode_program(prog);
  return p;
}

std::string json_escape(std::string s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    if (ch == '\n') {
      o += "\\n";
      continue;
    }
    o += ch;
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: gemm_bench N M K Nc [rtl|host] [name] [pseudo-channels]\n");
    return 2;
  }
  const int n = std::atoi(argv[1]);
  const uint32_t M = static_cast<uint32_t>(std::atoi(argv[2]));
  const uint32_t K = static_cast<uint32_t>(std::atoi(argv[3]));
  const uint32_t Nc = static_cast<uint32_t>(std::atoi(argv[4]));
  const std::string arith = argc > 5 ? argv[5] : "host";
  const std::string name = argc > 6 ? argv[6] : "gemm";
  const int channels = argc > 7 ? std::atoi(argv[7]) : 1;
  if (channels != 1 && channels != 2) {
    std::fprintf(stderr, "gemm_bench: pseudo-channels must be 1 or 2 (the chips built), not %s\n",
                 argv[7]);
    return 2;
  }
  if (M == 0 || K == 0 || Nc == 0 || K % n || Nc % n) {
    std::fprintf(stderr, "gemm_bench: M, K, Nc positive; K and Nc multiples of N = %d\n", n);
    return 2;
  }
  try {
    driver::DeviceConfig rc = driver::chip_for_array(n);
    rc.backend = driver::Backend::kRtl;
    rc.arith = driver::parse_arith(arith);
    rc.channels = channels;
    driver::DeviceConfig fc = rc;
    fc.backend = driver::Backend::kFunctional;
    auto rtl = driver::Device::open(rc);
    auto fun = driver::Device::open(fc);
    std::vector<uint16_t> A(size_t{M} * K), B(size_t{K} * Nc);
    for (size_t i = 0; i < A.size(); ++i) A[i] = operand(i, 1);
    for (size_t i = 0; i < B.size(); ++i) B[i] = operand(i, 2);
    auto bytes_of = [](const std::vector<uint16_t>& v) {
      std::vector<uint8_t> o(v.size() * 2);
      std::memcpy(o.data(), v.data(), o.size());
      return o;
    };
    const uint64_t c_bytes = uint64_t{M} * Nc * 4;
    std::vector<uint8_t> results[2];
    driver::RunReport report;
    Program prog;
    double wall = 0;
    for (int d = 0; d < 2; ++d) {
      driver::Device& dev = d == 0 ? *rtl : *fun;
      const uint64_t a = dev.alloc(A.size() * 2), w = dev.alloc(B.size() * 2),
                     c = dev.alloc(c_bytes);
      dev.write(a, bytes_of(A));
      dev.write(w, bytes_of(B));
      prog = compile(dev.config(), M, K / n, Nc / n, a, w, c);
      const uint64_t pa = dev.load_program(prog.bytes);
      const auto t0 = std::chrono::steady_clock::now();
      const driver::RunReport r = dev.run(pa, 20'000'000'000ull);
      if (d == 0) {
        report = r;
        wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      results[d] = dev.read(c, c_bytes);
    }
    if (results[0] != results[1]) {
      std::fprintf(stderr, "gemm_bench: the rtl chip's C differs from the functional model's\n");
      return 1;
    }
    // Each element within the fp32 summation bound of the exact sum (the products are exact):
    // |c - s| <= (K - 1) 2^-24 sum |a b| (+ one rounding of the total).
    for (uint32_t i = 0; i < M; i += std::max<uint32_t>(1, M / 61))
      for (uint32_t j = 0; j < Nc; j += std::max<uint32_t>(1, Nc / 17)) {
        double s = 0, mag = 0;
        for (uint32_t k = 0; k < K; ++k) {
          const double p =
              double(bf16_value(A[size_t{i} * K + k])) * double(bf16_value(B[size_t{k} * Nc + j]));
          s += p;
          mag += std::fabs(p);
        }
        float got;
        std::memcpy(&got, results[0].data() + (size_t{i} * Nc + j) * 4, 4);
        if (std::fabs(double(got) - s) > double(K) * std::ldexp(1.0, -24) * mag + 1e-30) {
          std::fprintf(stderr, "gemm_bench: C[%u][%u] = %.9g, exact %.9g: beyond the bound\n", i,
                       j, double(got), s);
          return 1;
        }
      }
    const double macs = double(M) * K * Nc;
    const double util = macs / (double(n) * n * double(report.cycles));
    std::printf(
        "{\"name\": \"%s\", \"N\": %d, \"channels\": %d, \"M\": %u, \"K\": %u, \"Nc\": %u, "
        "\"arith\": \"%s\", "
        "\"cycles\": %llu, \"macs\": %.0f, \"utilization\": %.6f, \"mxu_busy\": %llu, "
        "\"instructions\": %llu, \"executed\": %llu, \"hbm_bytes\": %llu, \"wall_seconds\": %.3f, "
        "\"tiling\": \"%s\"}\n",
        name.c_str(), n, channels, M, K, Nc, arith.c_str(),
        static_cast<unsigned long long>(report.cycles), macs, util,
        static_cast<unsigned long long>(report.perf[isa::PERF_MXU_BUSY]),
        static_cast<unsigned long long>(prog.stored),
        static_cast<unsigned long long>(prog.executed),
        static_cast<unsigned long long>(prog.hbm_bytes), wall, json_escape(prog.tiling).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
