// HbmPortModel: an independent C++ model of the slave side of Tessera's HBM port (the
// request / write-data / read-data / write-completion channels that rtl/dma/tpu_dma.sv masters
// and rtl/hbm's tpu_hbm serves). Byte-addressed sparse memory whose never-written bytes hold a
// fixed pseudo-random pattern (init_byte), so a test can tell every byte it did not write is
// unchanged. Random back-pressure on requests and write data, read bursts returned in request
// order after a random latency with random gaps, write strobes applied, write completions in
// request order. It checks the master's side of the protocol and throws std::runtime_error
// naming the cycle on a violation: request address 32-byte aligned and inside the memory; a
// valid held until ready with its payload stable; a write-data beat only for a write the master
// has requested (accepted or offered in that cycle); at the end, beats == write bursts.
//
// Per cycle: drive() gives the slave's outputs (decided before looking at the master's outputs
// of this cycle, as registered outputs would be); the caller applies them, evaluates the
// master, and calls edge() with the master's outputs, which performs every handshake of the
// cycle (the rising clock edge).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <unordered_map>

#include "harness/hbm/hbm_burst.h"

namespace tessera::hbm {


struct HbmSlaveOut {  // slave -> master
  bool req_ready = false;
  bool wd_ready = false;
  bool rd_valid = false;
  uint8_t rd_id = 0;
  Burst rd_data = {};
  bool rd_last = false;
  bool wr_done_valid = false;
  uint8_t wr_done_id = 0;
};

struct HbmMasterOut {  // master -> slave
  bool req_valid = false;
  bool req_write = false;
  uint64_t req_addr = 0;
  unsigned req_len = 0;  // bursts - 1
  uint8_t req_id = 0;
  bool wd_valid = false;
  Burst wd_data = {};
  uint32_t wd_strb = 0;  // bit k: byte k
  bool rd_ready = false;
  bool wr_done_ready = false;
};

struct HbmPortConfig {
  uint64_t bytes = 1ull << 32;  // memory size: every access must lie below it
  int req_ready_pct = 100;      // chance the slave takes a request in a cycle
  int wd_ready_pct = 100;       // chance it takes a write-data beat
  int rd_gap_pct = 0;           // chance a due read burst is held back a cycle
  int wr_done_gap_pct = 0;      // the same for a due write completion
  int min_latency = 5;          // cycles from request to its first read burst (or completion)
  int max_latency = 40;
  bool data_needs_request = true;  // take a beat only once its write request was accepted
};

class HbmPortModel {
 public:
  HbmPortModel(const HbmPortConfig& cfg, uint64_t seed);

  HbmSlaveOut drive();
  void edge(const HbmMasterOut& m);

  // Memory contents. init_byte is the value of a byte never written.
  uint8_t init_byte(uint64_t addr) const;
  uint8_t read_byte(uint64_t addr) const;
  void write_byte(uint64_t addr, uint8_t v);
  // Every byte address written through the port or write_byte (page granularity: 4 KiB pages).
  template <class F>
  void for_each_page(F f) const {
    for (const auto& [page, bytes] : pages_) f(page * kPage, bytes);
  }

  // Nothing in flight: every request answered, every completion taken. Throws if the
  // master's write-data beats do not match its write requests.
  bool idle() const;
  void check_final() const;
  // Forget everything in flight (the master was reset); memory is kept.
  void reset_port();

  uint64_t cycle() const { return cycle_; }
  uint64_t reads() const { return reads_; }
  uint64_t writes() const { return writes_; }
  HbmPortConfig& config() { return cfg_; }

  static constexpr uint64_t kPage = 4096;

 private:
  struct Read {
    uint64_t addr;
    unsigned bursts_left;
    uint8_t id;
    uint64_t due;
  };
  struct Write {
    uint64_t addr;
    unsigned bursts_left;  // beats still to come
    uint8_t id;
  };
  struct Done {
    uint8_t id;
    uint64_t due;
  };
  [[noreturn]] void fail(const std::string& what) const;
  std::array<uint8_t, kPage>& page(uint64_t addr);
  uint64_t latency();

  HbmPortConfig cfg_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  uint64_t cycle_ = 0;
  std::unordered_map<uint64_t, std::array<uint8_t, kPage>> pages_;

  std::deque<Read> reads_q_;
  std::deque<Write> writes_q_;  // accepted write requests waiting for their beats
  std::deque<Burst> early_beats_;
  std::deque<uint32_t> early_strbs_;
  std::deque<Done> done_q_;
  uint64_t last_read_due_ = 0, last_done_due_ = 0;

  HbmSlaveOut out_;  // this cycle's outputs (from drive())
  bool rd_presented_ = false;
  bool done_presented_ = false;
  Burst rd_burst_ = {};  // the burst offered, stable until taken

  // The previous cycle's master outputs, for the stability checks.
  HbmMasterOut prev_;
  bool prev_req_stall_ = false, prev_wd_stall_ = false;

  uint64_t write_bursts_ = 0, beats_ = 0;
  uint64_t reads_ = 0, writes_ = 0;
};

}  // namespace tessera::hbm
