// The pipeline's random numbers and shuffle order, fixed here so that a seed means the same
// batches with every compiler and standard library (std::uniform_int_distribution does not).
// Generator: xoshiro256** (Blackman and Vigna), its state seeded from splitmix64.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::data {

// splitmix64 (Steele, Lea, Flood): the seeding generator xoshiro's authors recommend.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

class Xoshiro256StarStar {
 public:
  // The four state words are the next four outputs of `seeder`.
  explicit Xoshiro256StarStar(SplitMix64 seeder) {
    for (uint64_t& word : state_) word = seeder.next();
  }
  uint64_t next() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }
  // Uniform in [0, n), n >= 1, without bias: draws below 2^64 mod n are rejected, which leaves a
  // multiple of n equally likely values, then reduces modulo n.
  uint64_t uniform_below(uint64_t n) {
    const uint64_t reject_below = (0 - n) % n;  // 2^64 mod n
    uint64_t draw;
    do {
      draw = next();
    } while (draw < reject_below);
    return draw % n;
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4];
};

// The generator for one epoch: xoshiro256** seeded by splitmix64 started at
// (first splitmix64 output from `seed`) XOR epoch.
inline Xoshiro256StarStar epoch_rng(uint64_t seed, uint64_t epoch) {
  return Xoshiro256StarStar(SplitMix64(SplitMix64(seed).next() ^ epoch));
}

// The order in which one epoch visits the ids 0..count-1, as tf.data's shuffle(buffer_size):
// the buffer starts with the first min(buffer, count) ids; each output is buffer[j] with j
// uniform over the buffer, and slot j then takes the next input id, or, once the input is
// exhausted, the buffer's last element (the buffer shrinks by one). buffer 1: identity.
std::vector<uint32_t> shuffle_order(uint32_t count, uint32_t buffer, uint64_t seed, uint64_t epoch);

}  // namespace tessera::data
