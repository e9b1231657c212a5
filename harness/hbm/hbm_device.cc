#include "harness/hbm/hbm_device.h"

#include <algorithm>

namespace tessera::hbm {

HbmChannelModel::HbmChannelModel(const HbmTiming& timing, int pc, uint32_t rows_per_bank)
    : timing_(timing), pc_(pc), rows_per_bank_(rows_per_bank), checker_(timing, pc) {
  if (timing_.banks() > static_cast<int>(open_row_.size())) {
    throw std::invalid_argument("HbmChannelModel: more than 64 banks per pseudo-channel");
  }
  if (timing_.burst_bytes() != kBurstBytes || timing_.burst_cycles * kBeatBytes != kBurstBytes) {
    throw std::invalid_argument("HbmChannelModel: models 32-byte bursts of 16-byte beats only");
  }
}

void HbmChannelModel::fail(uint64_t cycle, const std::string& why) const {
  throw HbmProtocolError("HBM pseudo-channel " + std::to_string(pc_) + ", cycle " +
                         std::to_string(cycle) + ": " + why);
}

uint64_t HbmChannelModel::key(int bg, int bank, uint32_t row, uint32_t col, uint64_t cycle) const {
  if (bg < 0 || bg >= timing_.bank_groups || bank < 0 || bank >= timing_.banks_per_group) {
    fail(cycle,
         "bank group " + std::to_string(bg) + " bank " + std::to_string(bank) + " does not exist");
  }
  if (row >= rows_per_bank_) {
    fail(cycle, "row " + std::to_string(row) + " is beyond the last row " +
                    std::to_string(rows_per_bank_ - 1));
  }
  if (col >= static_cast<uint32_t>(timing_.columns_per_row())) {
    fail(cycle, "column " + std::to_string(col) + " is beyond the row");
  }
  const uint64_t b = static_cast<uint64_t>(bg) * timing_.banks_per_group + bank;
  return (b * rows_per_bank_ + row) * timing_.columns_per_row() + col;
}

HbmPinsOut HbmChannelModel::step(uint64_t cycle, const HbmPinsIn& in) {
  if (started_ && cycle != last_cycle_ + 1) {
    fail(cycle, "stepped out of order (previous cycle " + std::to_string(last_cycle_) + ")");
  }
  started_ = true;
  last_cycle_ = cycle;
  HbmPinsOut out;

  if (in.cmd_valid) {
    HbmCommand c;
    c.cycle = cycle;
    c.cmd = in.cmd;
    c.pc = pc_;
    c.bg = in.bg;
    c.bank = in.bank;
    c.row = in.row;
    c.col = in.col;
    const bool column = in.cmd == HbmCmd::kRd || in.cmd == HbmCmd::kWr;
    if (in.cmd == HbmCmd::kAct) key(in.bg, in.bank, in.row, 0, cycle);  // range check
    checker_.issue(c);                                                  // throws on violation
    const int b = in.bg * timing_.banks_per_group + in.bank;
    if (in.cmd == HbmCmd::kAct) open_row_[b] = in.row;
    if (column) {
      const uint64_t k = key(in.bg, in.bank, open_row_[b], in.col, cycle);
      auto& queue = in.cmd == HbmCmd::kRd ? reads_ : writes_;
      const uint64_t first = cycle + (in.cmd == HbmCmd::kRd ? timing_.cl : timing_.cwl);
      for (int beat = 0; beat < timing_.burst_cycles; ++beat) {
        queue.push_back({first + beat, k, beat});
      }
      (in.cmd == HbmCmd::kRd ? bursts_read_ : bursts_written_)++;
    }
  }

  const bool read_due = !reads_.empty() && reads_.front().cycle == cycle;
  const bool write_due = !writes_.empty() && writes_.front().cycle == cycle;
  if (read_due && write_due) fail(cycle, "read data and write data on the data bus together");
  if (write_due) {
    if (!in.wdata_valid) fail(cycle, "write data expected (WR + CWL) but not driven");
    const Transfer t = writes_.front();
    writes_.pop_front();
    Burst& burst = storage_[t.key];  // zero-filled on first write
    for (int k = 0; k < kBeatBytes; ++k) {  // the data mask: only strobed bytes are written
      if ((in.wstrb >> k) & 1) burst[static_cast<size_t>(t.beat * kBeatBytes + k)] = in.wdata[k];
    }
  } else if (in.wdata_valid) {
    fail(cycle, "write data driven with no WR CWL cycles earlier");
  }
  if (read_due) {
    const Transfer t = reads_.front();
    reads_.pop_front();
    out.rdata_valid = true;
    const auto it = storage_.find(t.key);
    if (it == storage_.end()) {
      if (t.beat == 0) ++reads_of_unwritten_;
    } else {
      std::copy_n(it->second.begin() + t.beat * kBeatBytes, kBeatBytes, out.rdata.begin());
    }
  }
  return out;
}

void HbmChannelModel::finish(uint64_t cycle) {
  if (!reads_.empty() || !writes_.empty()) {
    fail(cycle, "simulation ended with data transfers still due");
  }
  checker_.finish(cycle);
}

void HbmChannelModel::poke(int bg, int bank, uint32_t row, uint32_t col, const Burst& data) {
  storage_[key(bg, bank, row, col, last_cycle_)] = data;
}

Burst HbmChannelModel::peek(int bg, int bank, uint32_t row, uint32_t col) const {
  const auto it = storage_.find(key(bg, bank, row, col, last_cycle_));
  return it == storage_.end() ? Burst{} : it->second;
}

uint64_t HbmChannelModel::capacity_bytes() const {
  return static_cast<uint64_t>(timing_.banks()) * rows_per_bank_ * timing_.row_bytes;
}

HbmDevice::HbmDevice(int pcs, const HbmTiming& timing, uint32_t rows_per_bank) {
  if (pcs < 1 || pcs > 16) throw std::invalid_argument("HbmDevice: 1 to 16 pseudo-channels");
  for (int pc = 0; pc < pcs; ++pc) channels_.emplace_back(timing, pc, rows_per_bank);
}

uint64_t HbmDevice::capacity_bytes() const {
  uint64_t total = 0;
  for (const auto& c : channels_) total += c.capacity_bytes();
  return total;
}

}  // namespace tessera::hbm
