#include "harness/hbm/hbm_port_model.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace tessera::hbm {

namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

HbmPortModel::HbmPortModel(const HbmPortConfig& cfg, uint64_t seed)
    : cfg_(cfg), seed_(seed), rng_(seed) {}

void HbmPortModel::fail(const std::string& what) const {
  std::ostringstream os;
  os << "HBM port protocol violation at cycle " << cycle_ << ": " << what;
  throw std::runtime_error(os.str());
}

uint8_t HbmPortModel::init_byte(uint64_t addr) const {
  return static_cast<uint8_t>(splitmix64(seed_ * 0x100000001B3ull ^ (addr >> 3)) >> (8 * (addr & 7)));
}

uint8_t HbmPortModel::read_byte(uint64_t addr) const {
  const auto it = pages_.find(addr / kPage);
  return it == pages_.end() ? init_byte(addr) : it->second[addr % kPage];
}

std::array<uint8_t, HbmPortModel::kPage>& HbmPortModel::page(uint64_t addr) {
  const uint64_t p = addr / kPage;
  auto it = pages_.find(p);
  if (it == pages_.end()) {
    std::array<uint8_t, kPage> bytes;
    for (uint64_t i = 0; i < kPage; ++i) bytes[i] = init_byte(p * kPage + i);
    it = pages_.emplace(p, bytes).first;
  }
  return it->second;
}

void HbmPortModel::write_byte(uint64_t addr, uint8_t v) { page(addr)[addr % kPage] = v; }

uint64_t HbmPortModel::latency() {
  const int span = std::max(0, cfg_.max_latency - cfg_.min_latency);
  return static_cast<uint64_t>(cfg_.min_latency + static_cast<int>(rng_() % (span + 1)));
}

HbmSlaveOut HbmPortModel::drive() {
  auto chance = [&](int pct) { return static_cast<int>(rng_() % 100) < pct; };
  HbmSlaveOut o;
  o.req_ready = chance(cfg_.req_ready_pct);
  o.wd_ready = chance(cfg_.wd_ready_pct) && (!cfg_.data_needs_request || !writes_q_.empty());
  // Read data: the head request's next burst once due; held once offered.
  if (!reads_q_.empty() && reads_q_.front().due <= cycle_ &&
      (rd_presented_ || !chance(cfg_.rd_gap_pct))) {
    const Read& r = reads_q_.front();
    if (!rd_presented_) {
      const uint64_t base = r.addr;
      for (int k = 0; k < kBurstBytes; ++k) rd_burst_[k] = read_byte(base + k);
      rd_presented_ = true;
    }
    o.rd_valid = true;
    o.rd_id = r.id;
    o.rd_data = rd_burst_;
    o.rd_last = r.bursts_left == 1;
  } else {
    // Nothing offered: junk on the data lines.
    for (auto& b : o.rd_data) b = static_cast<uint8_t>(rng_());
    o.rd_id = static_cast<uint8_t>(rng_() & 15);
  }
  if (!done_q_.empty() && done_q_.front().due <= cycle_ &&
      (done_presented_ || !chance(cfg_.wr_done_gap_pct))) {
    o.wr_done_valid = true;
    o.wr_done_id = done_q_.front().id;
    done_presented_ = true;
  }
  out_ = o;
  return o;
}

void HbmPortModel::edge(const HbmMasterOut& m) {
  // The master's side: a valid stays up with the same payload until taken.
  if (prev_req_stall_) {
    if (!m.req_valid) fail("request valid dropped before ready");
    if (m.req_write != prev_.req_write || m.req_addr != prev_.req_addr ||
        m.req_len != prev_.req_len || m.req_id != prev_.req_id) {
      fail("request payload changed while waiting for ready");
    }
  }
  if (prev_wd_stall_) {
    if (!m.wd_valid) fail("write-data valid dropped before ready");
    if (m.wd_data != prev_.wd_data || m.wd_strb != prev_.wd_strb) {
      fail("write-data payload changed while waiting for ready");
    }
  }

  // Requests.
  bool accepted_write = false;
  if (m.req_valid) {
    const uint64_t bytes = uint64_t(m.req_len + 1) * kBurstBytes;
    if (m.req_addr % kBurstBytes != 0) {
      std::ostringstream os;
      os << "request address 0x" << std::hex << m.req_addr << " not 32-byte aligned";
      fail(os.str());
    }
    if (m.req_addr + bytes > cfg_.bytes) {
      std::ostringstream os;
      os << "request at 0x" << std::hex << m.req_addr << " beyond the memory (0x" << cfg_.bytes
         << " bytes)";
      fail(os.str());
    }
    if (out_.req_ready) {
      if (m.req_write) {
        writes_q_.push_back({m.req_addr, m.req_len + 1, m.req_id});
        write_bursts_ += m.req_len + 1;
        ++writes_;
        accepted_write = true;
      } else {
        last_read_due_ = std::max(last_read_due_, cycle_ + latency());
        reads_q_.push_back({m.req_addr, m.req_len + 1, m.req_id, last_read_due_});
        ++reads_;
      }
    }
  }

  // Write data beats, matched to write requests in order.
  auto apply = [&](const Burst& data, uint32_t strb) {
    Write& w = writes_q_.front();
    const uint64_t base = w.addr;
    for (int k = 0; k < kBurstBytes; ++k) {
      if ((strb >> k) & 1u) write_byte(base + k, data[k]);
    }
    w.addr += kBurstBytes;
    if (--w.bursts_left == 0) {
      last_done_due_ = std::max(last_done_due_, cycle_ + latency());
      done_q_.push_back({w.id, last_done_due_});
      writes_q_.pop_front();
    }
  };
  if (m.wd_valid && out_.wd_ready) {
    ++beats_;
    const uint64_t offered =
        (m.req_valid && m.req_write && !accepted_write) ? uint64_t(m.req_len + 1) : 0;
    if (beats_ > write_bursts_ + offered) {
      fail("write-data beat for a write that was never requested");
    }
    early_beats_.push_back(m.wd_data);
    early_strbs_.push_back(m.wd_strb);
  }
  while (!early_beats_.empty() && !writes_q_.empty()) {
    apply(early_beats_.front(), early_strbs_.front());
    early_beats_.pop_front();
    early_strbs_.pop_front();
  }

  // Read data taken.
  if (out_.rd_valid && m.rd_ready) {
    Read& r = reads_q_.front();
    r.addr += kBurstBytes;
    rd_presented_ = false;
    if (--r.bursts_left == 0) reads_q_.pop_front();
  }
  // Completions taken.
  if (out_.wr_done_valid && m.wr_done_ready) {
    done_q_.pop_front();
    done_presented_ = false;
  }

  prev_ = m;
  prev_req_stall_ = m.req_valid && !out_.req_ready;
  prev_wd_stall_ = m.wd_valid && !out_.wd_ready;
  ++cycle_;
}

bool HbmPortModel::idle() const {
  return reads_q_.empty() && writes_q_.empty() && done_q_.empty() && early_beats_.empty();
}

void HbmPortModel::check_final() const {
  if (beats_ != write_bursts_) {
    std::ostringstream os;
    os << beats_ << " write-data beats for " << write_bursts_ << " write bursts requested";
    fail(os.str());
  }
}

void HbmPortModel::reset_port() {
  reads_q_.clear();
  writes_q_.clear();
  early_beats_.clear();
  early_strbs_.clear();
  done_q_.clear();
  rd_presented_ = done_presented_ = false;
  prev_req_stall_ = prev_wd_stall_ = false;
  beats_ = write_bursts_ = 0;
  last_read_due_ = last_done_due_ = 0;
}

}  // namespace tessera::hbm
