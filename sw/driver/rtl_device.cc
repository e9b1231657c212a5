// The rtl backend: the verilated chip (tpu_top) on the HBM2 device model, through ChipSim.
// Each supported configuration is one Verilator model (sim/CMakeLists.txt).
#include <sstream>

#include "Vtpu_top_n16.h"
#include "Vtpu_top_n4.h"
#include "harness/chip/chip_sim.h"
#include "tessera/driver.h"
#include "tessera/isa_gen.h"

namespace tessera::driver {

std::vector<DeviceConfig> rtl_configurations() {
  DeviceConfig c4, c16;
  c4.backend = c16.backend = Backend::kRtl;
  c4.n = 4;
  c4.ub_bytes = 8192;
  c4.acc_rows = 64;
  c16.n = 16;
  c16.ub_bytes = 65536;
  c16.acc_rows = 256;
  c4.channels = c16.channels = 1;
  return {c4, c16};
}

namespace {

template <class Model>
class RtlDevice : public Device {
 public:
  explicit RtlDevice(const DeviceConfig& c) : Device(c), chip_(c.channels) {}

  // The host port moves whole 32-byte bursts: a write that does not cover them merges with
  // what HBM holds.
  void write(uint64_t addr, const std::vector<uint8_t>& bytes) override {
    const uint64_t lo = addr / 32 * 32, hi = (addr + bytes.size() + 31) / 32 * 32;
    std::vector<uint8_t> buf;
    if (lo != addr || hi != addr + bytes.size()) {
      buf = chip_.hbm_read(lo, hi - lo);
    } else {
      buf.resize(hi - lo);
    }
    std::copy(bytes.begin(), bytes.end(), buf.begin() + static_cast<long>(addr - lo));
    chip_.hbm_write(lo, buf);
  }
  std::vector<uint8_t> read(uint64_t addr, size_t n) override {
    const uint64_t lo = addr / 32 * 32;
    std::vector<uint8_t> buf = chip_.hbm_read(lo, n + (addr - lo));
    return std::vector<uint8_t>(buf.begin() + static_cast<long>(addr - lo), buf.end());
  }
  uint32_t csr_read(uint32_t offset) override { return chip_.csr_read(offset); }

  RunReport run(uint64_t prog_addr, uint64_t timeout) override {
    // Doorbell at a fixed refresh phase: a program's cycle count is reproducible run to run.
    std::vector<chip::ChipSample> samples;
    const chip::ChipRun r =
        chip_.run(static_cast<uint32_t>(prog_addr), timeout, true, sample_every_, &samples);
    if (r.timed_out) throw DeviceTimeout(hang_report(timeout));
    if (r.status == isa::STATUS_FAULTED) throw_fault(r.cycles);
    RunReport rep;
    rep.cycles = r.cycles;
    for (int i = 0; i < kPerfCounters; ++i) rep.perf[i] = chip_.perf(i);
    rep.samples.reserve(samples.size());
    for (const auto& s : samples) {
      TraceSample t;
      t.cycle = s.cycle;
      t.pc = s.pc;
      t.unit_state = s.unit_state;
      t.busy = s.busy;
      t.macs = s.macs;
      t.hbm_bytes = s.hbm_bytes;
      rep.samples.push_back(t);
    }
    return rep;
  }

 private:
  chip::ChipSim<Model> chip_;
};

}  // namespace

std::unique_ptr<Device> make_rtl_device(const DeviceConfig& config) {
  const auto built = rtl_configurations();
  if (same_chip(config, built[0])) return std::make_unique<RtlDevice<Vtpu_top_n4>>(config);
  if (same_chip(config, built[1])) return std::make_unique<RtlDevice<Vtpu_top_n16>>(config);
  std::ostringstream s;
  s << "the rtl backend is built for N = 4 (UB 8192 bytes, 64 ACC rows) and N = 16 (UB 65536 "
    << "bytes, 256 ACC rows), 1 pseudo-channel; asked for N = " << config.n << ", UB "
    << config.ub_bytes << ", ACC " << config.acc_rows << ", " << config.channels
    << " pseudo-channel(s)";
  throw std::invalid_argument(s.str());
}

}  // namespace tessera::driver
