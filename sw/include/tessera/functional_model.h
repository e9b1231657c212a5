// The functional model of the Tessera chip: ISA-level and untimed (docs/isa.md is its
// specification; docs/architecture.md, "Functional model", says how to use it). It executes a
// program's instructions one at a time in program order, which is what a race-free program
// means on the RTL. Numerics are the host's IEEE binary32 arithmetic (contract 1): the MXU
// through sw/numerics/mxu_ref's reference_matmul (the architectural accumulation order), the DMA
// through sw/numerics/dma_ref's reference_walk, the VPU with plain float operations (the build has
// no FMA contraction, no fast-math, no flush-to-zero) and canonical NaNs.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/chip.h"
#include "tessera/isa.h"

namespace tessera::functional {

// The chip the model is (tessera::ChipShape's fields; defaults: the full chip's array with the
// large chip's buffers) and its HBM capacity (pseudo-channels x HBM_PC_BYTES; tests make it
// smaller to reach its end).
struct ChipConfig {
  int n = static_cast<int>(chip_params::CHIP_N);    // MXU array size = VPU lanes (4..128)
  uint64_t ub_bytes = chip_params::LARGE_UB_BYTES;  // unified buffer
  uint32_t acc_rows = chip_params::LARGE_ACC_ROWS;  // accumulator rows of n fp32
  uint64_t hbm_bytes = chip_params::HBM_PC_BYTES;   // HBM capacity
  ChipConfig() = default;
  ChipConfig(int n, uint64_t ub_bytes = chip_params::LARGE_UB_BYTES,
             uint32_t acc_rows = chip_params::LARGE_ACC_ROWS,
             uint64_t hbm_bytes = chip_params::HBM_PC_BYTES)
      : n(n), ub_bytes(ub_bytes), acc_rows(acc_rows), hbm_bytes(hbm_bytes) {}
  explicit ChipConfig(const ChipShape& s)
      : n(s.n), ub_bytes(s.ub_bytes), acc_rows(s.acc_rows), hbm_bytes(s.hbm_bytes()) {}
};

// QDEPTH (reported in CONFIG0; the model has no queues)
constexpr uint32_t kQueueDepth = chip_params::QUEUE_DEPTH;

// HBM as sparse 4 KiB pages; bytes never written read as 0. Accesses outside [0, size) throw
// std::out_of_range naming the address (these are driver/test helpers, not chip accesses).
class SparseHbm {
 public:
  explicit SparseHbm(uint64_t size) : size_(size) {}
  uint64_t size() const { return size_; }
  void read(uint64_t addr, void* dst, uint64_t len) const;
  void write(uint64_t addr, const void* src, uint64_t len);
  void fill(uint64_t addr, uint64_t len, uint8_t value);
  uint8_t read8(uint64_t addr) const;
  void write8(uint64_t addr, uint8_t v);
  uint32_t read32(uint64_t addr) const;
  void write32(uint64_t addr, uint32_t v);
  size_t pages() const { return pages_.size(); }

 private:
  static constexpr uint64_t kPage = 4096;
  void check(uint64_t addr, uint64_t len) const;
  std::unordered_map<uint64_t, std::unique_ptr<uint8_t[]>> pages_;
  uint64_t size_;
};

// kBlocked: the program waits on a remote counter (docs/isa.md, "Multi-chip") that no
// neighbour has signalled far enough yet; a FunctionalRing runs the neighbours on.
enum class RunStatus { kHalted, kFaulted, kWatchdog, kBlocked };

// A read of UB bytes or ACC rows that the current program has not written (UB and ACC are
// undefined at program start): a program error, not a chip fault. One entry per instruction
// (its first undefined byte or row).
struct UndefinedRead {
  enum class Space { kUb, kAcc };
  uint64_t pc = 0;
  Space space = Space::kUb;
  uint64_t addr = 0;  // UB byte address or ACC row
};

struct RunResult {
  RunStatus status = RunStatus::kHalted;
  uint32_t fault_code = 0;  // isa::FAULT_*; FAULT_NONE unless faulted
  uint64_t fault_pc = 0;
  uint64_t fault_addr = 0;  // two's complement for a negative DMA element address
  uint32_t fault_info = 0;
  uint64_t stop_pc = 0;       // watchdog / blocked: the instruction it stopped before
  uint64_t instructions = 0;  // retired (HALT included; the faulting instruction not)
  uint64_t macs = 0;          // MXU.MM rows x N x N
  std::vector<UndefinedRead> undefined_reads;
  std::string describe() const;  // one line: "halted after 12 instructions" / the fault
};

// Called with each decoded instruction before it executes (also one that then faults on a
// range check; not an illegal one).
using TraceHook = std::function<void(uint64_t pc, const isa::Instruction& inst)>;

class FunctionalModel {
 public:
  explicit FunctionalModel(const ChipConfig& config = {});

  const ChipConfig& config() const { return config_; }
  SparseHbm& hbm() { return hbm_; }
  const SparseHbm& hbm() const { return hbm_; }

  // Writes instructions as little-endian words to HBM at `addr`.
  void load_program(uint64_t addr, const std::vector<isa::Instruction>& program);
  void load_program(uint64_t addr, const std::vector<uint32_t>& words);

  // Runs the program at `prog_addr` (the doorbell): resets the registers, counters, loop
  // registers and weight tiles, forgets which UB bytes / ACC rows were written, then executes
  // until HALT, a fault, or `max_instructions` executed without halting (kWatchdog; the chip's
  // STATUS stays running).
  RunResult run(uint64_t prog_addr, uint64_t max_instructions = 100'000'000);

  // The same, one instruction at a time (a FunctionalRing interleaves its chips): start() is
  // the doorbell; step() executes the next instruction, or returns kBlocked (nothing done)
  // while it is a remote WAIT not yet met; kEnded after HALT or a fault. result() so far.
  enum class Step { kRan, kBlocked, kEnded };
  void start(uint64_t prog_addr);
  Step step();
  const RunResult& result() const { return result_; }
  uint64_t pc() const { return pc_; }

  // Multi-chip (docs/isa.md, "Multi-chip"): `neighbour` is the chip at the other end of this
  // chip's link (kNext or kPrev); nullptr takes the link down. Remote DMA copies write the
  // neighbour's memory, remote SIGNALs count its remote counters. Both chips must have the
  // same configuration (std::invalid_argument otherwise).
  void connect(isa::Link link, FunctionalModel* neighbour);
  bool link_up(isa::Link link) const { return neighbour(link) != nullptr; }
  uint32_t remote_counter(int rc) const { return rc_[rc]; }
  void set_trace_hook(TraceHook hook) { trace_ = std::move(hook); }

  // CSRs as the chip's host port reads them (docs/isa.md, CSRs); PERF counters other than MACS
  // and INSTRS read 0. csr_write handles IRQ_ENABLE, IRQ_PENDING (write 1 to clear) and
  // PROG_ADDR; DOORBELL is run().
  uint32_t csr_read(uint32_t offset) const;
  void csr_write(uint32_t offset, uint32_t value);

  // Architectural state, for tests and the differential tester.
  const std::vector<uint8_t>& ub() const { return ub_; }
  std::vector<uint8_t>& ub() { return ub_; }
  uint32_t acc(uint32_t row, int lane) const {
    return acc_[static_cast<size_t>(row) * config_.n + lane];
  }
  const std::vector<uint32_t>& vreg(int r) const { return v_[r]; }
  uint32_t sync_counter(int sc) const { return sc_[sc]; }
  size_t loaded_tiles() const { return tiles_.size(); }

 private:
  struct Fault {
    uint32_t code = 0;
    uint64_t addr = 0;
    uint32_t info = 0;
  };
  using LoopRegs = std::array<std::array<int64_t, 2>, 4>;  // [loop] = {count, stride}

  // Each returns true when the instruction faulted (fault_ filled).
  bool exec(uint64_t pc, const isa::Instruction& i, const isa::Words& w, RunResult& r);
  bool exec_dma_copy(uint64_t pc, const isa::Instruction& i, RunResult& r);
  bool exec_mxu(uint64_t pc, const isa::Instruction& i, const isa::Words& w, RunResult& r);
  bool exec_vpu(uint64_t pc, const isa::Instruction& i, const isa::Words& w, RunResult& r);
  void vpu_op(const isa::Instruction& i);

  // A UB access of `len` bytes at `addr` that must be a multiple of `align`: false with the
  // first bad byte (the address itself when misaligned or negative) when it is not allowed.
  bool ub_access_ok(int64_t addr, uint64_t len, uint64_t align, int64_t& bad) const;
  void note_ub_read(uint64_t pc, uint64_t addr, uint64_t len, RunResult& r, bool& noted);
  void note_acc_read(uint64_t pc, uint32_t row, RunResult& r, bool& noted);
  void mark_ub_written(uint64_t addr, uint64_t len);
  void mem_read(isa::Space s, uint64_t addr, uint8_t* dst, uint64_t len) const;
  void mem_write(isa::Space s, uint64_t addr, const uint8_t* src, uint64_t len);
  FunctionalModel* neighbour(isa::Link link) const {
    return link == isa::Link::kLocal ? nullptr : links_[static_cast<int>(link) - 1];
  }

  ChipConfig config_;
  SparseHbm hbm_;
  std::vector<uint8_t> ub_;
  std::vector<uint32_t> acc_;        // acc_rows x n
  std::vector<uint8_t> ub_written_;  // a byte per UB byte: 1 written (memchr finds a gap fast)
  std::vector<bool> acc_written_;
  std::array<std::vector<uint32_t>, 16> v_;
  std::array<uint32_t, 16> sc_{};
  std::array<uint32_t, 16> rc_{};            // remote counters: the neighbours' SIGNALs
  std::array<FunctionalModel*, 2> links_{};  // [link - 1]: next, prev (nullptr: down)
  uint64_t pc_ = 0;
  // The REPEAT body being executed (docs/isa.md, "Loops"): its first PC, length, iterations,
  // the iteration and the position in it.
  struct Loop {
    bool active = false;
    uint64_t start = 0;
    uint32_t len = 0, count = 0, iter = 0, pos = 0;
  } loop_;
  RunResult result_;
  std::array<uint32_t, 16> signals_dispatched_{};
  std::array<int, 16> signal_unit_{};        // the unit that signals each counter (-1: none yet)
  std::array<LoopRegs, 2> loops_{};          // [walk]
  std::deque<std::vector<uint16_t>> tiles_;  // n x n bf16, row k at [k * n]
  Fault fault_;
  TraceHook trace_;

  // CSR state
  uint32_t status_ = isa::STATUS_IDLE;
  uint64_t prog_addr_ = 0;
  uint32_t fault_code_ = 0, fault_info_ = 0;
  uint64_t fault_pc_ = 0, fault_addr_ = 0;
  uint32_t irq_enable_ = 0, irq_pending_ = 0, irq_code_ = 0;
  uint64_t perf_macs_ = 0, perf_instrs_ = 0;
};

}  // namespace tessera::functional
