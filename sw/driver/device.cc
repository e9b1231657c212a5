// Device: the backend-independent part of the driver (allocation, program loading, fault
// reports) and the functional backend. The rtl backend is in rtl_device.cc.
#include <algorithm>
#include <sstream>
#include <thread>

#include "tessera/driver.h"
#include "tessera/functional_model.h"
#include "tessera/functional_ring.h"
#include "tessera/isa_gen.h"
#include "tessera/mpi_ring.h"

namespace tessera::driver {

Backend parse_backend(const std::string& name) {
  if (name == "rtl") return Backend::kRtl;
  if (name == "functional") return Backend::kFunctional;
  throw std::invalid_argument("unknown backend '" + name + "' (expected rtl or functional)");
}
const char* backend_name(Backend b) { return b == Backend::kRtl ? "rtl" : "functional"; }

Arith parse_arith(const std::string& name) {
  if (name == "rtl") return Arith::kRtl;
  if (name == "host") return Arith::kHost;
  throw std::invalid_argument("unknown arithmetic build '" + name + "' (expected rtl or host)");
}
const char* arith_name(Arith a) { return a == Arith::kRtl ? "rtl" : "host"; }

const char* fault_name(uint32_t code) {
  static const char* const kNames[] = {
      "NONE",          "ILLEGAL_INSTRUCTION", "UB_RANGE",       "ACC_RANGE", "DMA",
      "SYNC_DEADLOCK", "FETCH_RANGE",         "MXU_NO_WEIGHTS", "MXU_TILES", "LINK_DOWN"};
  return code < 10 ? kNames[code] : "UNKNOWN";
}

namespace {
std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}
}  // namespace

uint64_t Device::alloc(uint64_t bytes) {
  const uint64_t size = std::max<uint64_t>(32, (bytes + 31) / 32 * 32);
  uint64_t at = 0;
  for (const auto& [a, n] : allocated_) {
    if (a >= at + size) break;
    at = std::max(at, a + n);
  }
  if (at + size > hbm_bytes()) {
    throw std::runtime_error("HBM allocation of " + std::to_string(bytes) + " bytes failed: " +
                             std::to_string(hbm_bytes()) + " bytes, fragmented or full");
  }
  allocated_[at] = size;
  return at;
}

void Device::free(uint64_t addr) {
  if (allocated_.erase(addr) == 0) {
    throw std::invalid_argument("free of " + hex(addr) + ": not an address alloc returned");
  }
}

uint64_t Device::load_program(const std::vector<uint8_t>& program) {
  if (program.empty() || program.size() % 16 != 0) {
    throw std::invalid_argument("a program is a whole number of 16-byte instructions, got " +
                                std::to_string(program.size()) + " bytes");
  }
  const uint64_t addr = alloc(program.size());
  write(addr, program);
  return addr;
}

bool same_chip(const DeviceConfig& a, const DeviceConfig& b) {
  return static_cast<const ChipShape&>(a) == static_cast<const ChipShape&>(b);
}

std::string Device::hang_report(uint64_t timeout) {
  const uint32_t st = csr_read(isa::CSR_UNIT_STATE), pc = csr_read(isa::CSR_PC);
  std::ostringstream s;
  s << "no HALT after " << timeout << " cycles; decode at pc 0x" << std::hex << pc << std::dec
    << ";";
  const char* names[] = {"DMA", "MXU", "VPU"};
  for (int u = 0; u < 3; ++u) {
    const uint32_t b = st >> (4 * u) & 15;
    s << " " << names[u] << ": ";
    if (b == 0) s << "idle";
    if (b & 1) s << "queued ";
    if (b & 2) s << "busy ";
    if (b & 4) s << "held by a WAIT ";
    if (b & 8) s << "refusing its next instruction ";
    s << ";";
  }
  return s.str();
}

void Device::arm_waves(const std::string& path, uint64_t, uint64_t) {
  throw std::invalid_argument("waves (" + path + "): the " + backend_name(config_.backend) +
                              " backend has no signals to dump; use --backend rtl");
}

void Device::throw_fault(uint64_t cycle) {
  const uint32_t code = csr_read(isa::CSR_FAULT_CODE), pc = csr_read(isa::CSR_FAULT_PC);
  const uint32_t addr = csr_read(isa::CSR_FAULT_ADDR), info = csr_read(isa::CSR_FAULT_INFO);
  std::ostringstream s;
  s << "chip fault " << fault_name(code) << " at pc " << hex(pc) << " (address " << hex(addr)
    << ", info " << hex(info) << ")";
  if (config_.backend == Backend::kRtl) s << " at cycle " << cycle;
  throw DeviceFault(s.str(), code, pc, addr, info, cycle);
}

namespace {

// The functional backend: the ISA-level model, untimed. A device owns its model, or (a chip of
// a functional Cluster) uses one of the ring's.
class FunctionalDevice : public Device {
 public:
  explicit FunctionalDevice(const DeviceConfig& c)
      : Device(c),
        owned_(std::make_unique<functional::FunctionalModel>(chip_config(c))),
        model_(*owned_) {}
  FunctionalDevice(const DeviceConfig& c, functional::FunctionalModel& m) : Device(c), model_(m) {}
  static functional::ChipConfig chip_config(const DeviceConfig& c) {
    return functional::ChipConfig(static_cast<const ChipShape&>(c));
  }
  void write(uint64_t addr, const std::vector<uint8_t>& bytes) override {
    model_.hbm().write(addr, bytes.data(), bytes.size());
  }
  std::vector<uint8_t> read(uint64_t addr, size_t n) override {
    std::vector<uint8_t> out(n);
    model_.hbm().read(addr, out.data(), n);
    return out;
  }
  uint32_t csr_read(uint32_t offset) override { return model_.csr_read(offset); }
  RunReport run(uint64_t prog_addr, uint64_t timeout) override {
    check(model_.run(prog_addr, timeout), timeout);
    return report();
  }
  // The outcome of a run of this chip (alone or in a ring) as the driver's exceptions.
  void check(const functional::RunResult& r, uint64_t timeout, const std::string& who = "") {
    if (r.status == functional::RunStatus::kWatchdog ||
        r.status == functional::RunStatus::kBlocked) {
      throw DeviceTimeout(who + "no HALT after " + std::to_string(timeout) +
                          " instructions (functional backend)" +
                          (r.status == functional::RunStatus::kBlocked
                               ? ": blocked on the remote WAIT at pc " + hex(r.stop_pc) +
                                     ", which no neighbour can meet"
                               : "; next instruction at pc " + hex(r.stop_pc)));
    }
    if (r.status == functional::RunStatus::kFaulted) {
      try {
        throw_fault(0);
      } catch (const DeviceFault& f) {
        if (who.empty()) throw;
        throw DeviceFault(who + f.what(), f.code, f.pc, f.addr, f.info, f.cycle);
      }
    }
  }
  RunReport report() {
    RunReport rep;
    for (int i = 0; i < kPerfCounters; ++i) {
      rep.perf[i] = uint64_t(model_.csr_read(isa::CSR_PERF_BASE + 8 * i)) |
                    uint64_t(model_.csr_read(isa::CSR_PERF_BASE + 8 * i + 4)) << 32;
    }
    return rep;
  }

 private:
  std::unique_ptr<functional::FunctionalModel> owned_;
  functional::FunctionalModel& model_;
};

class FunctionalCluster : public Cluster {
 public:
  FunctionalCluster(const DeviceConfig& c, int chips)
      : Cluster(c), ring_(chips, FunctionalDevice::chip_config(c)) {
    for (int r = 0; r < chips; ++r) {
      auto d = std::make_unique<FunctionalDevice>(c, ring_.chip(r));
      views_.push_back(d.get());
      chips_.push_back(std::move(d));
    }
  }
  std::vector<RunReport> run_all(const std::vector<uint64_t>& prog_addrs,
                                 uint64_t timeout) override {
    const functional::RingResult rr = ring_.run(prog_addrs, timeout);
    std::vector<RunReport> out;
    for (int r = 0; r < size(); ++r) {
      if (rr.chips[r].status == functional::RunStatus::kFaulted)
        views_[r]->check(rr.chips[r], timeout, "chip " + std::to_string(r) + ": ");
    }
    if (!rr.all_halted()) {
      throw DeviceTimeout("the ring did not finish (functional backend):\n" + rr.describe());
    }
    for (int r = 0; r < size(); ++r) out.push_back(views_[r]->report());
    return out;
  }

 private:
  functional::FunctionalRing ring_;
  std::vector<FunctionalDevice*> views_;
};

}  // namespace

std::unique_ptr<Device> make_rtl_device(const DeviceConfig& config);  // rtl_device.cc
std::unique_ptr<Cluster> make_rtl_cluster(const DeviceConfig& config, int chips, int threads);

std::unique_ptr<Cluster> Cluster::open(const DeviceConfig& config, int chips, int threads) {
  if (chips < 1) throw std::invalid_argument("a cluster needs at least one chip");
  if (threads <= 0) {
    threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  threads = std::min(threads, chips);
  if (mpi::launched()) {
    if (config.backend != Backend::kRtl)
      throw std::invalid_argument(
          "under mpirun only the rtl backend is distributed (one chip per rank); the functional "
          "backend runs every chip in one process: run it without mpirun");
    if (mpi::size() != chips)
      throw std::invalid_argument("mpirun started " + std::to_string(mpi::size()) + " ranks for " +
                                  std::to_string(chips) + " chips: one rank per chip");
  }
  if (config.backend == Backend::kRtl) return make_rtl_cluster(config, chips, threads);
  return std::make_unique<FunctionalCluster>(config, chips);
}

std::unique_ptr<Device> Device::open(const DeviceConfig& config) {
  if (config.backend == Backend::kRtl) return make_rtl_device(config);
  return std::make_unique<FunctionalDevice>(config);
}

}  // namespace tessera::driver
