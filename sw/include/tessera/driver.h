// The host driver: one interface to a Tessera device, with two backends — `rtl` (the verilated
// chip, cycle-accurate, on the HBM2 device model) and `functional` (the ISA-level model, untimed,
// bit-exact). A program run is: allocate HBM, copy data and the program in, launch (PROG_ADDR +
// doorbell), wait for HALT. A chip fault becomes a DeviceFault naming the cause, the PC, the
// address and the cycle; a run that does not end within its timeout becomes a DeviceTimeout that
// says what each unit was doing (queued work, busy, held by a WAIT, refused) and where decode
// stood. State between runs lives in HBM only (contract 4).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/chip.h"

namespace tessera::driver {

enum class Backend { kRtl, kFunctional };
Backend parse_backend(const std::string& name);  // "rtl" | "functional"; throws otherwise
const char* backend_name(Backend b);
// Which build of the chip the rtl backend simulates (docs/numerics.md, "Two builds of the same
// chip"): kRtl the synthesizable word-level arithmetic; kHost the simulation flavour whose MXU and
// VPU arithmetic functions are the host's IEEE unit (+define+TPU_SIM_HOST_ARITH) — the same
// registers and cycles, bit-identical results (test_host_arith), several times cheaper MACs.
// The functional backend ignores it.
enum class Arith { kRtl, kHost };
Arith parse_arith(const std::string& name);  // "rtl" | "host"; throws otherwise
const char* arith_name(Arith a);

// A device: the chip's shape (tessera::ChipShape) and how it is simulated.
struct DeviceConfig : ChipShape {
  Backend backend = Backend::kFunctional;
  Arith arith = Arith::kRtl;  // rtl backend: which build of the chip (not part of same_chip)
  DeviceConfig() = default;   // the full chip (kFullChip)
  explicit DeviceConfig(const ChipShape& shape, Backend backend = Backend::kFunctional,
                        Arith arith = Arith::kRtl)
      : ChipShape(shape), backend(backend), arith(arith) {}
};
// The configurations the rtl backend is built for (one Verilator model each; the N = 16,
// one-channel chip also in the host-arithmetic flavour: rtl_host_arith_built).
std::vector<DeviceConfig> rtl_configurations();
// The rtl chip of array size n with one pseudo-channel (its UB and ACC sizes); for an n the rtl
// backend is not built for, the functional backend's large chip: UB 256 KiB, 1024 ACC rows.
DeviceConfig chip_for_array(int n);
// The same chip (N, UB, ACC, channels), whatever the backend.
bool same_chip(const DeviceConfig& a, const DeviceConfig& b);
// True when the rtl backend has a host-arithmetic build of this chip.
bool rtl_host_arith_built(const DeviceConfig& config);
// Whether this build has a verilated chip of array size n: 4 and 16 always, 128 when built with
// make chip128 (TESSERA_CHIP_N128; host arithmetic).
bool rtl_array_built(int n);

constexpr int kPerfCounters = chip_params::PERF_COUNTERS;  // docs/isa.md, CSRs: PERF[i]
// A timeline sample of an rtl run (Device::set_sampling): the decode PC, UNIT_STATE and the
// cumulative counters at `cycle` cycles after the doorbell.
struct TraceSample {
  uint64_t cycle = 0;
  uint32_t pc = 0, unit_state = 0;
  std::array<uint64_t, 3> busy{};  // DMA, MXU, VPU busy cycles (PERF[1..3])
  uint64_t macs = 0, hbm_bytes = 0;
  // The HBM device pins since the doorbell, all pseudo-channels: data-bus cycles (a burst's
  // per RD or WR), read/write switches, REFs (the harness counts them; no CSR holds them).
  uint64_t hbm_bus = 0, hbm_turns = 0, hbm_refs = 0;
};
struct RunReport {
  uint64_t cycles = 0;  // doorbell to HALT (rtl); 0 on the functional backend (untimed)
  std::array<uint64_t, kPerfCounters> perf{};
  std::vector<TraceSample> samples;  // rtl with sampling on; else empty
  // rtl: the HBM pins over the whole run, as TraceSample's hbm_bus, hbm_turns, hbm_refs
  std::array<uint64_t, 3> hbm_pins{};
};

class DeviceFault : public std::runtime_error {
 public:
  DeviceFault(const std::string& what, uint32_t code, uint32_t pc, uint32_t addr, uint32_t info,
              uint64_t cycle)
      : std::runtime_error(what), code(code), pc(pc), addr(addr), info(info), cycle(cycle) {}
  uint32_t code, pc, addr, info;
  uint64_t cycle;
};

// The rtl backend: an assertion in the RTL failed while the program ran (the simulator printed
// its report: which check, in which block). A fault of the program as far as a caller goes
// (code FAULT_NONE, pc the decode PC then, cycle since the doorbell); the device's memory stays
// readable, its further runs are refused.
class DeviceAssertion : public DeviceFault {
 public:
  using DeviceFault::DeviceFault;
};

class DeviceTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Device {
 public:
  // Throws std::invalid_argument for a configuration the backend cannot provide.
  static std::unique_ptr<Device> open(const DeviceConfig& config);
  virtual ~Device() = default;
  const DeviceConfig& config() const { return config_; }
  uint64_t hbm_bytes() const { return config_.hbm_bytes(); }

  // HBM allocation: first fit, 32-byte granules; free takes an address alloc returned.
  uint64_t alloc(uint64_t bytes);
  void free(uint64_t addr);

  // Copies through the host port (rtl: cycle by cycle through the memory system).
  virtual void write(uint64_t addr, const std::vector<uint8_t>& bytes) = 0;
  virtual std::vector<uint8_t> read(uint64_t addr, size_t bytes) = 0;
  virtual uint32_t csr_read(uint32_t offset) = 0;

  // Allocates and writes a program (16-byte instructions); returns its address.
  uint64_t load_program(const std::vector<uint8_t>& program);
  // Launches the program and waits for HALT; throws DeviceFault or DeviceTimeout. The timeout is
  // in cycles (rtl) or instructions (functional).
  virtual RunReport run(uint64_t prog_addr, uint64_t timeout) = 0;
  // rtl: record a TraceSample every `every` cycles of the following runs (0: off). The
  // functional backend is untimed and ignores it.
  void set_sampling(uint64_t every) { sample_every_ = every; }
  uint64_t sampling() const { return sample_every_; }
  // rtl: the next run (run(), or this chip's part of a Cluster::run_all) dumps the chip's
  // signals for its cycles [from, to) after the doorbell into the FST file `path` (time in ns =
  // the program's cycle; docs/testing.md, "Waveforms"); the file is complete when that run
  // ends. The functional backend has no signals: std::invalid_argument.
  virtual void arm_waves(const std::string& path, uint64_t from, uint64_t to);

 protected:
  explicit Device(const DeviceConfig& config) : config_(config) {}
  // The fault CSRs as an exception with context.
  [[noreturn]] void throw_fault(uint64_t cycle);
  // For a DeviceTimeout of a timed backend: where decode stands (CSR PC) and what each unit is
  // doing (CSR UNIT_STATE: queued, busy, held by a WAIT, refusing).
  std::string hang_report(uint64_t timeout);

  DeviceConfig config_;
  std::map<uint64_t, uint64_t> allocated_;  // address -> bytes
  uint64_t sample_every_ = 0;
};

// A ring of `size()` identical chips joined by their ICI links (docs/multichip.md): chip r's
// `next` link to chip r + 1, `prev` to chip r − 1 (mod size). Each chip has its own HBM, seen
// through chip(r) — a Device whose run() is a solo run of that chip (for programs that use no
// link: the neighbours are not clocked meanwhile). run_all() starts program prog_addrs[r] on
// every chip r at once and returns when all have halted: rtl in lock-step windows of the link
// latency (on `threads` host threads; results do not depend on them), functional interleaved.
// A fault on any chip throws DeviceFault naming the chip (the others are stopped: rtl rings
// refuse further runs); a ring that does not finish throws DeviceTimeout with every chip's state.
class Cluster {
 public:
  // threads 0: one per chip, at most the host's cores.
  static std::unique_ptr<Cluster> open(const DeviceConfig& config, int chips, int threads = 0);
  virtual ~Cluster() = default;
  int size() const { return static_cast<int>(chips_.size()); }
  const DeviceConfig& config() const { return config_; }
  // Chip r's device; only chips of this process (local(r)): under mpirun each rank holds one.
  Device& chip(int r) {
    if (!local(r))
      throw std::logic_error("chip " + std::to_string(r) + " is simulated by another process");
    return *chips_.at(static_cast<size_t>(r));
  }
  virtual bool local(int /*r*/) const { return true; }
  // Every chip's small host-side record (a step's metrics): `mine` holds one per chip with
  // the local chips' filled in; every process gets all of them.
  virtual std::vector<std::vector<uint8_t>> gather(std::vector<std::vector<uint8_t>> mine) {
    return mine;
  }
  // Timeout in cycles (rtl) or instructions per chip (functional).
  virtual std::vector<RunReport> run_all(const std::vector<uint64_t>& prog_addrs,
                                         uint64_t timeout) = 0;

 protected:
  explicit Cluster(const DeviceConfig& config) : config_(config) {}
  DeviceConfig config_;
  std::vector<std::unique_ptr<Device>> chips_;
};

// "ILLEGAL_INSTRUCTION", ... for a fault code.
const char* fault_name(uint32_t code);

}  // namespace tessera::driver
