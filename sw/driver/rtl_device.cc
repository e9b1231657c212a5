// The rtl backend: the verilated chip (tpu_top) on the HBM2 device model, through ChipSim.
// Each supported configuration is one Verilator model (sim/CMakeLists.txt).
#include <sstream>

#include "Vtpu_top_n16.h"
#include "Vtpu_top_n16___024root.h"  // ChipSim: one evaluation a cycle
#include "Vtpu_top_n16_c2.h"
#include "Vtpu_top_n16_c2___024root.h"  // ChipSim: one evaluation a cycle
#include "Vtpu_top_n16_host.h"
#include "Vtpu_top_n16_host___024root.h"  // ChipSim: one evaluation a cycle
#include "Vtpu_top_n4.h"
#include "Vtpu_top_n4___024root.h"  // ChipSim: one evaluation a cycle
#ifdef TESSERA_CHIP_N128
#include "Vtpu_top_n128_host.h"
#include "Vtpu_top_n128_host___024root.h"  // ChipSim: one evaluation a cycle
#endif
#include "harness/chip/chip_sim.h"
#include "harness/chip/ring_sim.h"
#include "sim/host_arith.h"
#include "tessera/driver.h"
#include "tessera/isa_gen.h"
#include "tessera/mpi_ring.h"

namespace tessera::driver {

std::vector<DeviceConfig> rtl_configurations() {
  const DeviceConfig small(kSmallChip, Backend::kRtl), full(kFullChip, Backend::kRtl);
  DeviceConfig full_x2 = full;  // the same chip with two HBM pseudo-channels
  full_x2.channels = 2;
  return {small, full, full_x2};
}

DeviceConfig chip_for_array(int n) {
  for (const DeviceConfig& c : rtl_configurations())
    if (c.n == n && c.channels == 1) return c;
  return DeviceConfig(large_chip(n));
}

namespace {

std::vector<TraceSample> convert(const std::vector<chip::ChipSample>& samples) {
  std::vector<TraceSample> out;
  out.reserve(samples.size());
  for (const auto& s : samples) {
    TraceSample t;
    t.cycle = s.cycle;
    t.pc = s.pc;
    t.unit_state = s.unit_state;
    t.busy = s.busy;
    t.macs = s.macs;
    t.hbm_bytes = s.hbm_bytes;
    t.hbm_bus = s.hbm.bus;
    t.hbm_turns = s.hbm.turns;
    t.hbm_refs = s.hbm.refs;
    out.push_back(t);
  }
  return out;
}

// A chip of its own, or (a chip of an RtlCluster) one of a ring's.
template <class Model>
class RtlDevice : public Device {
 public:
  explicit RtlDevice(const DeviceConfig& c)
      : Device(c), owned_(std::make_unique<chip::ChipSim<Model>>(c.channels)), chip_(*owned_) {
    chip_.stop_on_assertion(true);
  }
  RtlDevice(const DeviceConfig& c, chip::ChipSim<Model>& chip) : Device(c), chip_(chip) {}
  RunReport counters(uint64_t cycles) {
    RunReport rep;
    rep.cycles = cycles;
    for (int i = 0; i < kPerfCounters; ++i) rep.perf[i] = chip_.perf(i);
    const chip::HbmPinCounts& p = chip_.pin_counts();
    rep.hbm_pins = {p.bus, p.turns, p.refs};
    return rep;
  }

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
  void arm_waves(const std::string& path, uint64_t from, uint64_t to) override {
    chip_.arm_waves(path, from, to);
  }

  RunReport run(uint64_t prog_addr, uint64_t timeout) override {
    if (assertion_failed_)
      throw DeviceAssertion(
          "the chip stopped on an RTL assertion in an earlier run; open a new "
          "device",
          0, 0, 0, 0, 0);
    // Doorbell at a fixed refresh phase: a program's cycle count is reproducible run to run.
    std::vector<chip::ChipSample> samples;
    const chip::ChipRun r =
        chip_.run(static_cast<uint32_t>(prog_addr), timeout, true, sample_every_, &samples);
    if (r.assertion_failed) {
      assertion_failed_ = true;
      const uint32_t pc = chip_.csr_read(isa::CSR_PC);
      std::ostringstream s;
      s << "RTL assertion failed at cycle " << r.cycles << " (decode at pc 0x" << std::hex << pc
        << "): the program did what the chip's checks forbid; the simulator's report above "
           "names the check";
      throw DeviceAssertion(s.str(), 0, pc, 0, 0, r.cycles);
    }
    if (r.timed_out) throw DeviceTimeout(hang_report(timeout));
    if (r.status == isa::STATUS_FAULTED) throw_fault(r.cycles);
    RunReport rep = counters(r.cycles);
    rep.samples = convert(samples);
    return rep;
  }

 private:
  std::unique_ptr<chip::ChipSim<Model>> owned_;
  chip::ChipSim<Model>& chip_;
  bool assertion_failed_ = false;
};

// The ring's other processes, under mpirun: one chip per rank, every window's traffic and
// states exchanged with one MPI_Allgather.
class MpiTransport : public chip::RingTransport {
 public:
  int local() const override { return mpi::rank(); }
  void exchange(const void* mine, void* all, size_t bytes) override {
    mpi::allgather(mine, all, bytes);
  }
};

template <class Model>
class RtlCluster : public Cluster {
 public:
  RtlCluster(const DeviceConfig& c, int chips, int threads)
      : Cluster(c),
        transport_(mpi::launched() ? std::make_unique<MpiTransport>() : nullptr),
        ring_(chips, c.channels, kLinkLatency, threads, hbm::HbmTiming{}, "", transport_.get()) {
    ring_.stop_on_assertion(true);  // reported as a chip's error, as for one chip
    for (int r = 0; r < chips; ++r) {
      if (!ring_.is_local(r)) {
        views_.push_back(nullptr);
        chips_.push_back(nullptr);
        continue;
      }
      auto d = std::make_unique<RtlDevice<Model>>(c, ring_.chip(r));
      views_.push_back(d.get());
      chips_.push_back(std::move(d));
    }
  }
  bool local(int r) const override { return ring_.is_local(r); }
  std::vector<std::vector<uint8_t>> gather(std::vector<std::vector<uint8_t>> mine) override {
    if (!transport_) return mine;
    const auto all = mpi::allgather(mine.at(mpi::rank()));
    return all;
  }
  std::vector<RunReport> run_all(const std::vector<uint64_t>& prog_addrs,
                                 uint64_t timeout) override {
    std::vector<uint32_t> progs(prog_addrs.begin(), prog_addrs.end());
    // Chip sampling (Device::set_sampling on a chip of this process) samples the ring run too.
    uint64_t every = 0;
    for (int r = 0; r < size(); ++r)
      if (local(r)) every = std::max(every, views_[r]->sampling());
    const chip::RingRun run = ring_.run(progs, timeout, true, every);
    for (int r = 0; r < size(); ++r) {
      const chip::ChipRun& c = run.chips[r];
      if (c.assertion_failed)
        throw DeviceAssertion("chip " + std::to_string(r) + ": RTL assertion failed at cycle " +
                                  std::to_string(c.cycles) +
                                  ": the program did what the chip's checks forbid (the "
                                  "simulator's report names the check); the ring:" +
                                  run.error,
                              0, 0, 0, 0, c.cycles);
      if (c.status == isa::STATUS_FAULTED) {
        throw DeviceFault("chip " + std::to_string(r) + ": chip fault " + fault_name(c.fault_code) +
                              " at cycle " + std::to_string(c.cycles) + "; the ring:" + run.error,
                          c.fault_code, c.fault_pc, c.fault_addr, c.fault_info, c.cycles);
      }
    }
    if (!run.error.empty()) throw DeviceTimeout("the ring did not finish: " + run.error);
    std::vector<RunReport> out;
    for (int r = 0; r < size(); ++r) {
      if (local(r)) {
        out.push_back(views_[r]->counters(run.chips[r].cycles));
        if (views_[r]->sampling()) out.back().samples = convert(ring_.samples(r));
      } else {
        RunReport rep;  // another process's chip: its cycles (its counters stay there)
        rep.cycles = run.chips[r].cycles;
        out.push_back(rep);
      }
    }
    return out;
  }

 private:
  static constexpr int kLinkLatency = 32;  // cycles: the lock-step window
  std::unique_ptr<MpiTransport> transport_;
  chip::RingSim<Model> ring_;
  std::vector<RtlDevice<Model>*> views_;
};

}  // namespace

namespace {
[[noreturn]] void not_built(const DeviceConfig& config) {
  std::ostringstream s;
  s << "the rtl backend is built for";
  const auto built = rtl_configurations();
  for (size_t i = 0; i < built.size(); ++i)
    s << (i ? (i + 1 == built.size() ? " and" : ",") : "") << " N = " << built[i].n << " (UB "
      << built[i].ub_bytes << " bytes, " << built[i].acc_rows << " ACC rows, " << built[i].channels
      << " pseudo-channel" << (built[i].channels > 1 ? "s)" : ")");
  s << "; asked for N = " << config.n << ", UB " << config.ub_bytes << ", ACC " << config.acc_rows
    << ", " << config.channels << " pseudo-channel(s)";
  throw std::invalid_argument(s.str());
}
}  // namespace

bool rtl_array_built(int n) {
#ifdef TESSERA_CHIP_N128
  if (n == 128) return true;
#endif
  return n == 4 || n == 16;
}

bool rtl_host_arith_built(const DeviceConfig& config) {
#ifdef TESSERA_CHIP_N128
  if (same_chip(config, DeviceConfig(large_chip(128)))) return true;
#endif
  return same_chip(config, rtl_configurations()[1]);
}

namespace {
// The host-arithmetic build exists for one chip, and only gives the RTL's results where the
// host's floating-point environment is IEEE round-to-nearest with subnormals.
void check_host_arith(const DeviceConfig& config) {
  if (!rtl_host_arith_built(config)) {
    const DeviceConfig c16 = rtl_configurations()[1];
    throw std::invalid_argument(
        "the host-arithmetic build of the chip (--arith host) exists for N = 16, UB " +
        std::to_string(c16.ub_bytes) + " bytes, " + std::to_string(c16.acc_rows) +
        " ACC rows, 1 pseudo-channel (and N = 128 in a build with make chip128); asked for N = " +
        std::to_string(config.n) + ", " + std::to_string(config.channels) +
        " pseudo-channel(s): use --arith rtl");
  }
  if (!tessera_host_arith::environment_ok())
    throw std::runtime_error(
        "the host's floating-point environment is not round-to-nearest with subnormals kept "
        "(FTZ/DAZ or another rounding mode is set): the host-arithmetic build would not match the "
        "RTL; use --arith rtl");
}
}  // namespace

std::unique_ptr<Device> make_rtl_device(const DeviceConfig& config) {
  const auto built = rtl_configurations();
  if (config.arith == Arith::kHost) {
    check_host_arith(config);
#ifdef TESSERA_CHIP_N128
    if (config.n == 128) return std::make_unique<RtlDevice<Vtpu_top_n128_host>>(config);
#endif
    return std::make_unique<RtlDevice<Vtpu_top_n16_host>>(config);
  }
  if (same_chip(config, built[0])) return std::make_unique<RtlDevice<Vtpu_top_n4>>(config);
  if (same_chip(config, built[1])) return std::make_unique<RtlDevice<Vtpu_top_n16>>(config);
  if (same_chip(config, built[2])) return std::make_unique<RtlDevice<Vtpu_top_n16_c2>>(config);
  not_built(config);
}

std::unique_ptr<Cluster> make_rtl_cluster(const DeviceConfig& config, int chips, int threads) {
  const auto built = rtl_configurations();
  if (config.arith == Arith::kHost) {
    check_host_arith(config);
#ifdef TESSERA_CHIP_N128
    if (config.n == 128)
      return std::make_unique<RtlCluster<Vtpu_top_n128_host>>(config, chips, threads);
#endif
    return std::make_unique<RtlCluster<Vtpu_top_n16_host>>(config, chips, threads);
  }
  if (same_chip(config, built[0]))
    return std::make_unique<RtlCluster<Vtpu_top_n4>>(config, chips, threads);
  if (same_chip(config, built[1]))
    return std::make_unique<RtlCluster<Vtpu_top_n16>>(config, chips, threads);
  if (same_chip(config, built[2]))
    return std::make_unique<RtlCluster<Vtpu_top_n16_c2>>(config, chips, threads);
  not_built(config);
}

}  // namespace tessera::driver
