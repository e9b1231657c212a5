// End-to-end programs through the driver (sw/driver) on the rtl backend (the chip at N = 4) and
// the functional backend: a tiled matmul + bias + relu (8 x 8 by 8 x 8: two K tiles accumulated
// in the MXU, two column tiles, the bias add and relu on the VPU) and a row-wise softmax (the
// exponential as a sequence of VPU operations: 2^(x log2 e) split into an integer power built in
// the exponent bits and a degree-7 polynomial). Each must be bit-identical between the backends
// and within 1e-5 relative error (norm-wise) of a float64 reference computed from the same
// bf16-rounded inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "sw/compiler/matmul_lowering.h"
#include "sw/compiler/program_builder.h"
#include "sw/numerics/fp_ref.h"
#include "tessera/asm.h"
#include "tessera/driver.h"
#include "tessera/isa_gen.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

constexpr int kN = 4;

std::vector<uint8_t> bytes_of(const std::vector<uint16_t>& v) {
  std::vector<uint8_t> b(2 * v.size());
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
std::vector<uint8_t> bytes_of(const std::vector<float>& v) {
  std::vector<uint8_t> b(4 * v.size());
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
std::vector<float> floats_of(const std::vector<uint8_t>& b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}
double rel_norm_error(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

// Runs `prog` with the inputs on both backends; returns the rtl result (checked equal to the
// functional one).
std::vector<uint8_t> run_both(const std::string& prog,
                              const std::vector<std::pair<uint64_t, std::vector<uint8_t>>>& in,
                              uint64_t out_addr, size_t out_bytes, uint64_t* rtl_cycles = nullptr) {
  const auto a = assembler::assemble(prog, {static_cast<uint32_t>(kN)});
  EXPECT_TRUE(a.ok()) << (a.ok() ? "" : assembler::format_error("prog", a.errors[0]));
  std::vector<uint8_t> result[2];
  uint64_t cycles = 0;
  for (int b = 0; b < 2; ++b) {
    const driver::DeviceConfig c(kSmallChip,
                                 b == 0 ? driver::Backend::kFunctional : driver::Backend::kRtl);
    auto dev = driver::Device::open(c);
    for (const auto& [addr, bytes] : in) dev->write(addr, bytes);
    const uint64_t p = dev->load_program(a.bytes());
    const driver::RunReport r = dev->run(p, 5'000'000);
    if (b == 1) cycles = r.cycles;
    result[b] = dev->read(out_addr, out_bytes);
  }
  EXPECT_EQ(result[0], result[1]) << "the rtl and functional backends disagree";
  std::cout << "rtl: " << cycles << " cycles\n";
  if (rtl_cycles) *rtl_cycles = cycles;
  return result[1];
}

TEST(Programs, TiledMatmulBiasReluMatchesFloat64) {
  std::mt19937_64 rng(test::test_seed());
  const int M = 8, K = 8, O = 8;
  std::vector<uint16_t> A(M * K), W(K * O);
  std::vector<float> bias(O);
  auto bf = [&](double lo, double hi) {
    return fp::fp32_to_bf16(fp::bits(static_cast<float>(lo + (hi - lo) * (rng() % 10000) / 1e4)));
  };
  for (auto& x : A) x = bf(-2, 2);
  for (auto& x : W) x = bf(-1, 1);
  for (auto& x : bias) x = static_cast<float>(-1 + 2.0 * (rng() % 1000) / 1000);
  // HBM: A 0x10000 (row-major, 16 bytes a row), W 0x11000, bias 0x12000, out 0x13000 (fp32 8x8)
  std::ostringstream p;
  p << "dma.loop src, 0, 64, 2, 1, 0\ndma.loop dst, 0, 64, 2, 1, 0\n"
    << "dma.copy hbm, ub, 2, 0x10000, 0x0\n"    // A  -> UB 0x000
    << "dma.copy hbm, ub, 2, 0x11000, 0x100\n"  // W  -> UB 0x100
    << "dma.loop src, 0, 8, 4, 1, 0\ndma.loop dst, 0, 8, 4, 1, 0\n"
    << "dma.copy hbm, ub, 4, 0x12000, 0x200\n"  // bias -> UB 0x200
    << "signal dma, sc0\nwait mxu, sc0, 1\nwait vpu, sc0, 1\n";
  for (int j = 0; j < 2; ++j) {    // column tile: outputs 4j .. 4j+3 into ACC rows 8j ..
    for (int k = 0; k < 2; ++k) {  // K tile: W rows 4k .. 4k+3, A columns 4k .. 4k+3
      p << "mxu.ldw 0x" << std::hex << (0x100 + 16 * 4 * k + 8 * j) << std::dec << ", 16\n";
      p << "mxu.mm " << (k ? "acc" : "set") << ", 0x" << std::hex << 8 * k << std::dec
        << ", 16, 8, " << 8 * j << "\n";
    }
  }
  p << "signal mxu, sc1\nwait vpu, sc1, 1\n";
  for (int j = 0; j < 2; ++j) {
    p << "vpu.ld f32, v2, 0x" << std::hex << 0x200 + 16 * j << std::dec << "\n";  // bias
    for (int r = 0; r < M; ++r) {
      p << "vpu.ld acc, v1, " << 8 * j + r << "\n"
        << "vpu.op add, v3, v1, v2, v0\n"
        << "vpu.op max, v4, v3, v0, v0\n"
        << "vpu.st f32, v4, 0x" << std::hex << 0x400 + 32 * r + 16 * j << std::dec << "\n";
    }
  }
  p << "signal vpu, sc2\nwait dma, sc2, 1\n"
    << "dma.loop src, 0, 64, 4, 1, 0\ndma.loop dst, 0, 64, 4, 1, 0\n"
    << "dma.copy ub, hbm, 4, 0x400, 0x13000\nhalt\n";
  const auto out = floats_of(
      run_both(p.str(), {{0x10000, bytes_of(A)}, {0x11000, bytes_of(W)}, {0x12000, bytes_of(bias)}},
               0x13000, 4 * M * O));
  std::vector<double> ref(M * O);
  for (int m = 0; m < M; ++m) {
    for (int o = 0; o < O; ++o) {
      double s = bias[o];
      for (int k = 0; k < K; ++k) {
        s += double(fp::f32(fp::bf16_to_fp32(A[m * K + k]))) *
             double(fp::f32(fp::bf16_to_fp32(W[k * O + o])));
      }
      ref[m * O + o] = std::max(0.0, s);
    }
  }
  const double err = rel_norm_error(out, ref);
  std::cout << "tiled matmul + bias + relu: relative error " << err << "\n";
  EXPECT_LT(err, 1e-5);
}

// The same kind of program on the N = 16 chip: a 32 x 32 by 32 x 32 matmul (two K tiles, two
// column tiles) + relu, rtl against the functional model and float64.
TEST(Programs, MatmulReluAtN16) {
  std::mt19937_64 rng(test::test_seed());
  const int n = 16, M = 32, K = 32, O = 32;
  std::vector<uint16_t> A(M * K), W(K * O);
  auto bf = [&](double lo, double hi) {
    return fp::fp32_to_bf16(fp::bits(static_cast<float>(lo + (hi - lo) * (rng() % 10000) / 1e4)));
  };
  for (auto& x : A) x = bf(-2, 2);
  for (auto& x : W) x = bf(-1, 1);
  std::ostringstream p;
  p << "dma.loop src, 0, 1024, 2, 1, 0\ndma.loop dst, 0, 1024, 2, 1, 0\n"
    << "dma.copy hbm, ub, 2, 0x10000, 0x0\n"    // A: 64 bytes a row
    << "dma.copy hbm, ub, 2, 0x11000, 0x800\n"  // W: 64 bytes a row
    << "signal dma, sc0\nwait mxu, sc0, 1\n";
  for (int j = 0; j < 2; ++j) {
    for (int k = 0; k < 2; ++k) {
      p << "mxu.ldw 0x" << std::hex << (0x800 + 64 * n * k + 32 * j) << std::dec << ", 64\n";
      p << "mxu.mm " << (k ? "acc" : "set") << ", 0x" << std::hex << 32 * k << std::dec << ", 64, "
        << M << ", " << M * j << "\n";
    }
  }
  p << "signal mxu, sc1\nwait vpu, sc1, 1\n";
  for (int j = 0; j < 2; ++j) {
    for (int r = 0; r < M; ++r) {
      p << "vpu.ld acc, v1, " << M * j + r << "\nvpu.op max, v2, v1, v0, v0\n"
        << "vpu.st f32, v2, 0x" << std::hex << 0x1000 + 128 * r + 64 * j << std::dec << "\n";
    }
  }
  p << "signal vpu, sc2\nwait dma, sc2, 1\n"
    << "dma.loop src, 0, 1024, 4, 1, 0\ndma.loop dst, 0, 1024, 4, 1, 0\n"
    << "dma.copy ub, hbm, 4, 0x1000, 0x20000\nhalt\n";  // 1024 fp32
  const auto a = assembler::assemble(p.str(), {static_cast<uint32_t>(n)});
  ASSERT_TRUE(a.ok()) << assembler::format_error("prog", a.errors[0]);
  std::vector<uint8_t> result[2];
  for (int b = 0; b < 2; ++b) {
    const driver::DeviceConfig c(kFullChip,
                                 b == 0 ? driver::Backend::kFunctional : driver::Backend::kRtl);
    auto dev = driver::Device::open(c);
    dev->write(0x10000, bytes_of(A));
    dev->write(0x11000, bytes_of(W));
    const driver::RunReport r = dev->run(dev->load_program(a.bytes()), 5'000'000);
    if (b == 1)
      std::cout << "rtl N = 16: " << r.cycles << " cycles, " << r.perf[isa::PERF_MACS] << " MACs\n";
    result[b] = dev->read(0x20000, 4 * M * O);
  }
  EXPECT_EQ(result[0], result[1]) << "the rtl and functional backends disagree";
  const auto out = floats_of(result[1]);
  std::vector<double> ref(M * O);
  for (int m = 0; m < M; ++m) {
    for (int o = 0; o < O; ++o) {
      double s = 0;
      for (int k = 0; k < K; ++k) {
        s += double(fp::f32(fp::bf16_to_fp32(A[m * K + k]))) *
             double(fp::f32(fp::bf16_to_fp32(W[k * O + o])));
      }
      ref[m * O + o] = std::max(0.0, s);
    }
  }
  const double err = rel_norm_error(out, ref);
  std::cout << "N = 16 matmul + relu: relative error " << err << "\n";
  EXPECT_LT(err, 1e-5);
}

// The compiler's MXU shape bound (ProgramBuilder's mxu_cycles: max(rows, N + 1) an MXU.MM, the
// next tile's weights loading on their own UB port) against the chip: eight LDW + MM of 64 rows
// in one burst keep the MXU busy for the bound plus the first tile's load and the array's drain
// (2N - 1), not a weight load more a tile (the shared-port design took N + 64 a tile).
// SIGNAL mxu, sc, reads counts once the MXU has read its UB operands, while the array still
// computes: a DMA waiting on it overwrites the activation rows and the weight tile the MXU
// just streamed, and the results are still those of the old operands (the functional model
// runs the program in order; float64 checks both matmuls). Against the same program with a
// full SIGNAL, the overwrite starts before the array drains, so the program takes fewer cycles.
TEST(Programs, AReadsSignalFreesTheMxusOperandsBeforeTheArrayDrains) {
  std::mt19937_64 rng(test::test_seed());
  const int M = 32, K = kN, O = kN;  // one tile: rows of 2N bytes
  std::vector<uint16_t> A[2], W[2];
  for (int s = 0; s < 2; ++s) {
    A[s].resize(M * K);
    W[s].resize(K * O);
    for (auto& x : A[s]) x = fp::fp32_to_bf16(fp::bits(float(int(rng() % 17) - 8) / 4));
    for (auto& x : W[s]) x = fp::fp32_to_bf16(fp::bits(float(int(rng() % 17) - 8) / 4));
  }
  auto program = [&](bool reads) {
    std::ostringstream p;
    const int a_el = M * K, w_el = K * O;
    auto copy = [&](const char* spaces, uint32_t src, uint32_t dst, int el) {
      p << "dma.loop src, 0, " << el << ", 2, 1, 0\ndma.loop dst, 0, " << el << ", 2, 1, 0\n"
        << "dma.copy " << spaces << ", 2, 0x" << std::hex << src << ", 0x" << dst << std::dec
        << "\n";
    };
    // set 0 into the operand rows, set 1 staged beside them
    copy("hbm, ub", 0x10000, 0x0, a_el);
    copy("hbm, ub", 0x10800, 0x400, w_el);
    copy("hbm, ub", 0x11000, 0x1000, a_el);
    copy("hbm, ub", 0x11800, 0x1400, w_el);
    p << "signal dma, sc0\nwait mxu, sc0, 1\n";
    for (int s = 0; s < 2; ++s) {
      p << "mxu.ldw 0x400, " << 2 * kN << "\nmxu.mm set, 0x0, " << 2 * kN << ", " << M << ", "
        << M * s << "\n";
      if (s == 1) break;
      // set 1 over the rows the MXU just read (UB to UB: no HBM latency to hide the drain)
      p << "signal mxu, sc1" << (reads ? ", reads" : "") << "\nwait dma, sc1, 1\n";
      copy("ub, ub", 0x1000, 0x0, a_el);
      copy("ub, ub", 0x1400, 0x400, w_el);
      p << "signal dma, sc0\nwait mxu, sc0, 2\n";
    }
    p << "signal mxu, sc1\nwait vpu, sc1, 2\n";
    for (int r = 0; r < 2 * M; ++r)
      p << "vpu.ld acc, v1, " << r << "\nvpu.st f32, v1, 0x" << std::hex << 0x800 + 4 * kN * r
        << std::dec << "\n";
    p << "signal vpu, sc2\nwait dma, sc2, 1\n"
      << "dma.loop src, 0, " << 2 * M * O << ", 4, 1, 0\ndma.loop dst, 0, " << 2 * M * O
      << ", 4, 1, 0\ndma.copy ub, hbm, 4, 0x800, 0x20000\nhalt\n";
    return p.str();
  };
  const std::vector<std::pair<uint64_t, std::vector<uint8_t>>> in = {
      {0x10000, bytes_of(A[0])}, {0x10800, bytes_of(W[0])},
      {0x11000, bytes_of(A[1])}, {0x11800, bytes_of(W[1])}};
  uint64_t cycles[2] = {0, 0};
  std::vector<float> out[2];
  for (int reads = 0; reads < 2; ++reads)
    out[reads] = floats_of(run_both(program(reads == 1), in, 0x20000, 4 * 2 * M * O, &cycles[reads]));
  EXPECT_EQ(out[0], out[1]);
  for (int s = 0; s < 2; ++s)
    for (int m = 0; m < M; ++m)
      for (int o = 0; o < O; ++o) {
        double ref = 0;  // small multiples of 1/16: exact in fp32
        for (int k = 0; k < K; ++k)
          ref += double(fp::f32(fp::bf16_to_fp32(A[s][m * K + k]))) *
                 double(fp::f32(fp::bf16_to_fp32(W[s][k * O + o])));
        EXPECT_EQ(out[1][(s * M + m) * O + o], float(ref)) << "set " << s << " row " << m;
      }
  std::cout << "full SIGNAL " << cycles[0] << " cycles, reads-only " << cycles[1] << "\n";
  EXPECT_LT(cycles[1], cycles[0]);
}

// The compiler's GEMM (lowering::emit_gemm: emit_matmul's tilings, the time model choosing
// half- or whole-ACC blocks) on the rtl chip against the functional model, bit for bit, and
// against float64 within the fp32 summation bound. The shapes cover whole-ACC blocks whose
// column tiles take the accumulator's two banks in turn (each contraction group the low bank's
// tiles, then the high bank's; the epilogue of one bank beside the MXU's work on the other),
// ragged row blocks and column groups (a last group whose tiles all sit in the low bank), and
// half-ACC blocks.
TEST(Programs, CompiledGemmsMatchTheFunctionalModelAndFloat64) {
  struct Case {
    int n;
    uint32_t M, Kt, Ct;
    bool banked;  // the tiling must take the two banks in turn
  };
  const Case cases[] = {{4, 32, 4, 8, true},      {4, 40, 4, 10, true}, {4, 64, 16, 16, true},
                        {4, 20, 3, 5, true},      {16, 256, 32, 16, true},
                        {16, 128, 4, 16, false}};
  std::mt19937_64 rng(test::test_seed());
  for (const Case& c : cases) {
    const uint32_t K = c.Kt * c.n, Nc = c.Ct * c.n;
    std::vector<uint16_t> A(size_t{c.M} * K), B(size_t{K} * Nc);
    for (auto& x : A) x = fp::fp32_to_bf16(fp::bits(static_cast<float>(int(rng() % 33) - 16) / 8));
    for (auto& x : B) x = fp::fp32_to_bf16(fp::bits(static_cast<float>(int(rng() % 33) - 16) / 16));
    std::vector<uint8_t> out[2];
    std::string tiling;
    for (int be = 0; be < 2; ++be) {
      driver::DeviceConfig cfg = driver::chip_for_array(c.n);
      cfg.backend = be == 0 ? driver::Backend::kFunctional : driver::Backend::kRtl;
      auto dev = driver::Device::open(cfg);
      const uint64_t a = dev->alloc(A.size() * 2), w = dev->alloc(B.size() * 2),
                     cc = dev->alloc(uint64_t{c.M} * Nc * 4);
      dev->write(a, bytes_of(A));
      dev->write(w, bytes_of(B));
      const ChipShape& chip = dev->config();
      compiler::ProgramBuilder b(chip.n, chip.ub_bytes, chip.acc_rows);
      tiling = compiler::lowering::emit_gemm(b, c.M, c.Kt, c.Ct, a, w, cc, chip.ub_bytes,
                                             chip.acc_rows);
      const uint64_t p = dev->load_program(isa::encode_program(b.finish()));
      const driver::RunReport r = dev->run(p, 50'000'000);
      if (be == 1) std::cout << tiling << ": " << r.cycles << " cycles\n";
      out[be] = dev->read(cc, uint64_t{c.M} * Nc * 4);
    }
    SCOPED_TRACE(tiling);
    EXPECT_EQ(tiling.find("its two banks in turn") != std::string::npos, c.banked);
    ASSERT_EQ(out[0], out[1]) << "the rtl and functional backends disagree";
    const std::vector<float> got = floats_of(out[1]);
    for (uint32_t i = 0; i < c.M; ++i)
      for (uint32_t j = 0; j < Nc; ++j) {
        double s = 0, mag = 0;
        for (uint32_t k = 0; k < K; ++k) {
          const double t = double(fp::f32(fp::bf16_to_fp32(A[size_t{i} * K + k]))) *
                           double(fp::f32(fp::bf16_to_fp32(B[size_t{k} * Nc + j])));
          s += t;
          mag += std::fabs(t);
        }
        ASSERT_LE(std::fabs(double(got[size_t{i} * Nc + j]) - s), K * std::ldexp(mag, -24))
            << "C[" << i << "][" << j << "]";
      }
  }
}

TEST(Programs, MxuStreamsTilesBackToBackAtItsShapeBound) {
  const int n = 16, rows = 64, tiles = 8;
  std::ostringstream p;
  p << "dma.loop src, 0, 1024, 2, 1, 0\ndma.loop dst, 0, 1024, 2, 1, 0\n"
    << "dma.copy hbm, ub, 2, 0x10000, 0x0\n"  // A: 64 rows of 16 bf16
    << "dma.loop src, 0, 256, 2, 1, 0\ndma.loop dst, 0, 256, 2, 1, 0\n"
    << "dma.copy hbm, ub, 2, 0x11000, 0x800\n"  // a weight tile
    << "signal dma, sc0\nwait mxu, sc0, 1\n";
  compiler::ProgramBuilder bound(n, kFullChip.ub_bytes, kFullChip.acc_rows);
  for (int t = 0; t < tiles; ++t) {
    p << "mxu.ldw 0x800, 32\nmxu.mm set, 0x0, 32, " << rows << ", " << rows * t << "\n";
    bound.mxu_ldw(0x800, 32);
    bound.mxu_mm(false, 0, 32, rows, rows * t);
  }
  p << "signal mxu, sc1\nhalt\n";
  const auto a = assembler::assemble(p.str(), {static_cast<uint32_t>(n)});
  ASSERT_TRUE(a.ok()) << assembler::format_error("prog", a.errors[0]);
  auto dev = driver::Device::open(driver::DeviceConfig(kFullChip, driver::Backend::kRtl));
  std::vector<uint16_t> ones(1024, 0x3F80);
  dev->write(0x10000, bytes_of(ones));
  dev->write(0x11000, bytes_of(ones));
  const driver::RunReport r = dev->run(dev->load_program(a.bytes()), 1'000'000);
  const uint64_t busy = r.perf[isa::PERF_MXU_BUSY], shape = bound.stats().mxu_cycles;
  std::printf("MXU busy %llu cycles, shape bound %llu\n", static_cast<unsigned long long>(busy),
              static_cast<unsigned long long>(shape));
  EXPECT_EQ(shape, uint64_t{tiles} * rows);
  EXPECT_EQ(r.perf[isa::PERF_MACS], uint64_t{tiles} * rows * n * n);
  EXPECT_GE(busy, shape);
  EXPECT_LE(busy, shape + n + 2 * n + 8) << "a gap between tiles";
}

// The VPU's two UB ports (tpu_ub_port): an fp32 vector at N = 16 is two 32-byte words in
// different banks, taken in one cycle. 128 loads and 128 stores of fp32 vectors (a copy of 8 KiB
// inside the UB) keep the VPU busy about one cycle an instruction (a port took two a vector),
// and the copy matches the functional model.
TEST(Programs, VpuMovesAnFp32VectorACycle) {
  const int n = 16, vectors = 128;
  std::ostringstream p;
  p << "dma.loop src, 0, 2048, 4, 1, 0\ndma.loop dst, 0, 2048, 4, 1, 0\n"
    << "dma.copy hbm, ub, 4, 0x10000, 0x0\nsignal dma, sc0\nwait vpu, sc0, 1\n"
    << "repeat " << vectors << ", 2\nvpu.ld f32, v1, 0x0, 64\nvpu.st f32, v1, 0x2000, 64\n"
    << "signal vpu, sc1\nwait dma, sc1, 1\n"
    << "dma.loop src, 0, 2048, 4, 1, 0\ndma.loop dst, 0, 2048, 4, 1, 0\n"
    << "dma.copy ub, hbm, 4, 0x2000, 0x20000\nhalt\n";
  const auto a = assembler::assemble(p.str(), {static_cast<uint32_t>(n)});
  ASSERT_TRUE(a.ok()) << assembler::format_error("prog", a.errors[0]);
  std::mt19937_64 rng(test::test_seed());
  std::vector<uint8_t> data(8192);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> out[2];
  uint64_t busy = 0;
  for (int b = 0; b < 2; ++b) {
    auto dev = driver::Device::open(driver::DeviceConfig(
        kFullChip, b == 0 ? driver::Backend::kFunctional : driver::Backend::kRtl));
    dev->write(0x10000, data);
    const driver::RunReport r = dev->run(dev->load_program(a.bytes()), 1'000'000);
    if (b == 1) busy = r.perf[isa::PERF_VPU_BUSY];
    out[b] = dev->read(0x20000, data.size());
  }
  EXPECT_EQ(out[0], data);
  EXPECT_EQ(out[1], data) << "the rtl copy differs";
  std::printf("VPU busy %llu cycles for %d fp32 loads and stores\n",
              static_cast<unsigned long long>(busy), 2 * vectors);
  EXPECT_GE(busy, uint64_t{2} * vectors);
  EXPECT_LE(busy, uint64_t{2} * vectors + vectors / 4) << "a vector took more than a cycle";
}

TEST(Programs, RowSoftmaxMatchesFloat64) {
  std::mt19937_64 rng(test::test_seed());
  const int rows = 6;
  std::vector<float> x(rows * kN);
  for (auto& v : x) v = static_cast<float>(-6 + 12.0 * (rng() % 100000) / 1e5);
  const float log2e = 1.4426950408889634f;
  // 2^f for f in (-1, 0]: sum of (f ln 2)^i / i!, i = 0..7 (Horner).
  std::vector<float> c(8);
  double fact = 1;
  for (int i = 0; i < 8; ++i) {
    if (i) fact *= i;
    c[i] = static_cast<float>(std::pow(std::log(2.0), i) / fact);
  }
  auto li = [](int reg, float v) {
    std::ostringstream s;
    s << "vpu.li v" << reg << ", 0x" << std::hex << fp::bits(v) << "\n";
    return s.str();
  };
  std::ostringstream p;
  p << "dma.loop src, 0, " << rows * kN << ", 4, 1, 0\ndma.loop dst, 0, " << rows * kN
    << ", 4, 1, 0\ndma.copy hbm, ub, 4, 0x10000, 0x0\nsignal dma, sc0\nwait vpu, sc0, 1\n"
    << li(10, log2e) << "vpu.li v11, 23\n";
  for (int r = 0; r < rows; ++r) {
    p << "vpu.ld f32, v1, 0x" << std::hex << 16 * r << std::dec << "\n"
      << "vpu.op rmax, v2, v1, v0, v0\n"  // m
      << "vpu.op sub, v3, v1, v2, v0\n"   // x - m <= 0
      << "vpu.op mul, v4, v3, v10, v0\n"  // t = (x - m) log2 e
      << "vpu.op f2i, v5, v4, v0, v0\n"   // k = trunc(t) <= 0
      << "vpu.op i2f, v6, v5, v0, v0\n"
      << "vpu.op sub, v7, v4, v6, v0\n"  // f = t - k in (-1, 0]
      << li(8, c[7]);
    for (int i = 6; i >= 0; --i) {
      p << "vpu.op mul, v8, v8, v7, v0\n" << li(9, c[i]) << "vpu.op add, v8, v8, v9, v0\n";
    }
    p << "vpu.op shl, v12, v5, v11, v0\n"   // k << 23
      << "vpu.op iadd, v13, v8, v12, v0\n"  // 2^f * 2^k in the exponent bits
      << "vpu.op rsum, v14, v13, v0, v0\n"
      << "vpu.op div, v15, v13, v14, v0\n"
      << "vpu.st f32, v15, 0x" << std::hex << 0x400 + 16 * r << std::dec << "\n";
  }
  p << "signal vpu, sc1\nwait dma, sc1, 1\n"
    << "dma.copy ub, hbm, 4, 0x400, 0x11000\nhalt\n";
  const auto out = floats_of(run_both(p.str(), {{0x10000, bytes_of(x)}}, 0x11000, 4 * rows * kN));
  std::vector<double> ref(rows * kN);
  for (int r = 0; r < rows; ++r) {
    double m = -1e300, s = 0;
    for (int l = 0; l < kN; ++l) m = std::max(m, double(x[r * kN + l]));
    for (int l = 0; l < kN; ++l) s += std::exp(double(x[r * kN + l]) - m);
    for (int l = 0; l < kN; ++l) ref[r * kN + l] = std::exp(double(x[r * kN + l]) - m) / s;
  }
  const double err = rel_norm_error(out, ref);
  std::cout << "row softmax: relative error " << err << "\n";
  EXPECT_LT(err, 1e-5);
}

// Every Verilator build of the chip reports, in its CONFIG CSRs, the configuration the host
// takes from chip_params.h (tessera/chip.h): the builds and the host read one source.
TEST(ChipParams, EveryRtlBuildReportsTheGeneratedConfiguration) {
  auto log2 = [](uint64_t v) {
    uint32_t l = 0;
    while ((uint64_t{1} << l) < v) ++l;
    return l;
  };
  for (driver::DeviceConfig c : driver::rtl_configurations()) {
    for (const driver::Arith a : {driver::Arith::kRtl, driver::Arith::kHost}) {
      if (a == driver::Arith::kHost && !driver::rtl_host_arith_built(c)) continue;
      c.arith = a;
      SCOPED_TRACE("N " + std::to_string(c.n) + ", " + std::to_string(c.channels) +
                   " channel(s), arith " + driver::arith_name(a));
      auto dev = driver::Device::open(c);
      EXPECT_EQ(dev->csr_read(isa::CSR_CONFIG0),
                log2(c.n) | log2(chip_params::QUEUE_DEPTH) << 8 | log2(c.channels) << 16);
      EXPECT_EQ(dev->csr_read(isa::CSR_CONFIG1), c.ub_bytes);
      EXPECT_EQ(dev->csr_read(isa::CSR_CONFIG2), c.acc_rows);
    }
  }
  EXPECT_EQ(static_cast<const ChipShape&>(driver::rtl_configurations()[0]), kSmallChip);
  EXPECT_EQ(static_cast<const ChipShape&>(driver::rtl_configurations()[1]), kFullChip);
}

}  // namespace
}  // namespace tessera
