// Helpers every test uses: the running test's name (for its waveform file), a seeded random
// generator that prints its seed and takes TESSERA_SEED to replay a failure, counts that a
// long run can raise, generators of interesting IEEE bit patterns, and a scratch directory.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera::test {

// A fresh directory for one test (under gtest's temp dir, named PREFIX_XXXXXX), removed with
// its files when the object goes.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "tessera_test") {
    std::string pattern = ::testing::TempDir() + prefix + "_XXXXXX";
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed: " + pattern);
    path_ = pattern;
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string current_test_name() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string(info->test_suite_name()) + "." + info->name();
}

// Seed from TESSERA_SEED, else from the test name (stable run to run); printed either way.
inline uint64_t test_seed() {
  uint64_t seed;
  if (const char* s = std::getenv("TESSERA_SEED")) {
    seed = std::strtoull(s, nullptr, 0);
  } else {
    seed = std::hash<std::string>{}(current_test_name()) & 0xFFFFFFFFu;
  }
  std::cout << "[ seed     ] " << current_test_name() << " TESSERA_SEED=" << seed << std::endl;
  return seed;
}

// A count of random cases: `fallback` in make sim, TESSERA_FP_VECTORS in the long target.
inline uint64_t vector_count(uint64_t fallback) {
  if (const char* s = std::getenv("TESSERA_FP_VECTORS")) return std::strtoull(s, nullptr, 0);
  return fallback;
}

// fp32 patterns of every special class and the values around rounding boundaries.
inline std::vector<uint32_t> fp32_specials() {
  std::vector<uint32_t> mags = {
      0x00000000, 0x00000001, 0x00000002, 0x00000003, 0x003FFFFF, 0x00400000, 0x007FFFFF,
      0x00800000, 0x00800001, 0x00FFFFFF, 0x01000000, 0x0C000000, 0x33800000, 0x33FFFFFF,
      0x34000000, 0x337FFFFF, 0x33800001, 0x33C00000, 0x3F000000, 0x3F7FFFFF, 0x3F800000,
      0x3F800001, 0x3F808000, 0x3F807FFF, 0x3F808001, 0x3F818000, 0x3FFFFFFF, 0x40000000,
      0x4B000000, 0x4B7FFFFF, 0x7E800000, 0x7F000000, 0x7F7FFFFF, 0x7F7F7FFF, 0x7F7F8000,
      0x7F7F8001, 0x7F800000, 0x7F800001, 0x7FBFFFFF, 0x7FC00000, 0x7FC00001, 0x7FFFFFFF,
      0x00008000, 0x00018000, 0x00017FFF};
  std::vector<uint32_t> out;
  for (uint32_t m : mags) {
    out.push_back(m);
    out.push_back(m | 0x80000000u);
  }
  return out;
}

// bf16 patterns of every special class.
inline std::vector<uint16_t> bf16_specials() {
  std::vector<uint16_t> mags = {0x0000, 0x0001, 0x0002, 0x003F, 0x0040, 0x007F, 0x0080, 0x0081,
                                0x00FF, 0x0100, 0x1F80, 0x2000, 0x3F00, 0x3F7F, 0x3F80, 0x3F81,
                                0x3FFF, 0x4000, 0x5F80, 0x6000, 0x7F00, 0x7F7F, 0x7F80, 0x7F81,
                                0x7FBF, 0x7FC0, 0x7FC1, 0x7FFF, 0x1A00, 0x0C80, 0x0C00, 0x2080};
  std::vector<uint16_t> out;
  for (uint16_t m : mags) {
    out.push_back(m);
    out.push_back(static_cast<uint16_t>(m | 0x8000u));
  }
  return out;
}

// Random fp32 bit patterns biased toward hard cases: close exponents (cancellation), tiny
// values (subnormal results), near-overflow, specials, and uniform bits.
class Fp32Gen {
 public:
  explicit Fp32Gen(uint64_t seed) : rng_(seed) {}
  uint32_t operator()() {
    const uint32_t r = static_cast<uint32_t>(rng_());
    switch (rng_() % 8) {
      case 0:
        return r;  // any pattern
      case 1:
        return (r & 0x807FFFFFu) | ((rng_() % 4) << 23);  // subnormal / tiny normals
      case 2:
        return (r & 0x807FFFFFu) | ((0xFC + rng_() % 3) << 23);  // near overflow
      case 3: {                                                  // specials
        const auto& s = specials_;
        return s[rng_() % s.size()];
      }
      default:
        return (r & 0x807FFFFFu) | ((120 + rng_() % 16) << 23);  // close exponents
    }
  }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
  std::vector<uint32_t> specials_ = fp32_specials();
};

// Random bf16 patterns: mostly ordinary values around 1, some tiny (product underflow), some
// huge (overflow), some specials, some uniform bits.
class Bf16Gen {
 public:
  explicit Bf16Gen(uint64_t seed) : rng_(seed) {}
  uint16_t operator()() {
    const uint16_t r = static_cast<uint16_t>(rng_());
    switch (rng_() % 8) {
      case 0:
        return r;
      case 1:
        return static_cast<uint16_t>((r & 0x807F) | ((rng_() % 70) << 7));  // tiny
      case 2:
        return static_cast<uint16_t>((r & 0x807F) | ((190 + rng_() % 65) << 7));  // huge
      case 3:
        return specials_[rng_() % specials_.size()];
      default:
        return static_cast<uint16_t>((r & 0x807F) | ((118 + rng_() % 18) << 7));
    }
  }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
  std::vector<uint16_t> specials_ = bf16_specials();
};

}  // namespace tessera::test
