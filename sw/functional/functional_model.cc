// The functional model of the Tessera chip (docs/isa.md). Every instruction executes to
// completion in program order.
#include "tessera/functional_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "sw/functional/mxu_tile.h"
#include "sw/numerics/dma_ref.h"
#include "sw/numerics/fp_ref.h"

namespace tessera::functional {

using isa::Funct;
using isa::Instruction;
using isa::Opcode;

namespace {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

int log2_floor(uint64_t v) {
  int l = 0;
  while (v > 1) {
    v >>= 1;
    ++l;
  }
  return l;
}

const char* fault_name(uint32_t code) {
  static const char* const kNames[] = {
      "NONE",          "ILLEGAL_INSTRUCTION", "UB_RANGE",       "ACC_RANGE", "DMA",
      "SYNC_DEADLOCK", "FETCH_RANGE",         "MXU_NO_WEIGHTS", "MXU_TILES", "LINK_DOWN"};
  return code < 10 ? kNames[code] : "?";
}

// VPU lane operations (docs/isa.md, VPU). Float results go through fp::canonical so that every
// NaN is 0x7FC00000.
uint32_t f_min(uint32_t a, uint32_t b) {
  if (fp::is_nan32(a) || fp::is_nan32(b)) return fp::kFp32CanonicalNan;
  const float x = fp::f32(a), y = fp::f32(b);
  if (x == 0.0f && y == 0.0f) return (a | b) & 0x80000000u;  // min(-0, +0) = -0
  return x < y ? a : b;
}

uint32_t f_max(uint32_t a, uint32_t b) {
  if (fp::is_nan32(a) || fp::is_nan32(b)) return fp::kFp32CanonicalNan;
  const float x = fp::f32(a), y = fp::f32(b);
  if (x == 0.0f && y == 0.0f) return a & b & 0x80000000u;  // max(-0, +0) = +0
  return x > y ? a : b;
}
// max4's value (argmax4 compares against it): max's rules, any grouping.
uint32_t f_max4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return f_max(f_max(f_max(a, b), c), d);
}

uint32_t f2i(uint32_t a) {
  const float x = fp::f32(a);
  if (std::isnan(x)) return 0;
  if (x >= 2147483648.0f) return 0x7FFFFFFFu;
  if (x < -2147483648.0f) return 0x80000000u;
  return static_cast<uint32_t>(static_cast<int32_t>(x));  // truncation toward zero
}

// The pairwise tree of rsum / rmax: level 1 combines lanes (0,1), (2,3), ...; each level
// combines neighbouring results of the previous one until one value remains.
template <typename Op>
uint32_t reduce_tree(std::vector<uint32_t> v, Op op) {
  while (v.size() > 1) {
    std::vector<uint32_t> next(v.size() / 2);
    for (size_t i = 0; i < next.size(); ++i) next[i] = op(v[2 * i], v[2 * i + 1]);
    v.swap(next);
  }
  return v[0];
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// SparseHbm

void SparseHbm::check(uint64_t addr, uint64_t len) const {
  if (addr > size_ || len > size_ - addr) {
    throw std::out_of_range("HBM access of " + std::to_string(len) + " bytes at " + hex(addr) +
                            " is outside the HBM (" + hex(size_) + " bytes)");
  }
}

uint8_t SparseHbm::read8(uint64_t addr) const {
  const auto it = pages_.find(addr / kPage);
  return it == pages_.end() ? 0 : it->second[addr % kPage];
}

void SparseHbm::write8(uint64_t addr, uint8_t v) {
  auto& p = pages_[addr / kPage];
  if (!p) {
    p.reset(new uint8_t[kPage]);
    std::memset(p.get(), 0, kPage);
  }
  p[addr % kPage] = v;
}

void SparseHbm::read(uint64_t addr, void* dst, uint64_t len) const {
  check(addr, len);
  auto* d = static_cast<uint8_t*>(dst);
  while (len > 0) {
    const uint64_t off = addr % kPage;
    const uint64_t n = std::min(len, kPage - off);
    const auto it = pages_.find(addr / kPage);
    if (it == pages_.end()) {
      std::memset(d, 0, n);
    } else {
      std::memcpy(d, it->second.get() + off, n);
    }
    d += n;
    addr += n;
    len -= n;
  }
}

void SparseHbm::write(uint64_t addr, const void* src, uint64_t len) {
  check(addr, len);
  const auto* s = static_cast<const uint8_t*>(src);
  while (len > 0) {
    const uint64_t off = addr % kPage;
    const uint64_t n = std::min(len, kPage - off);
    auto& p = pages_[addr / kPage];
    if (!p) {
      p.reset(new uint8_t[kPage]);
      std::memset(p.get(), 0, kPage);
    }
    std::memcpy(p.get() + off, s, n);
    s += n;
    addr += n;
    len -= n;
  }
}

void SparseHbm::fill(uint64_t addr, uint64_t len, uint8_t value) {
  check(addr, len);
  const std::vector<uint8_t> chunk(std::min<uint64_t>(len, kPage), value);
  while (len > 0) {
    const uint64_t n = std::min<uint64_t>(len, chunk.size());
    write(addr, chunk.data(), n);
    addr += n;
    len -= n;
  }
}

uint32_t SparseHbm::read32(uint64_t addr) const {
  uint8_t b[4];
  read(addr, b, 4);
  return b[0] | b[1] << 8 | b[2] << 16 | static_cast<uint32_t>(b[3]) << 24;
}

void SparseHbm::write32(uint64_t addr, uint32_t v) {
  const uint8_t b[4] = {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8),
                        static_cast<uint8_t>(v >> 16), static_cast<uint8_t>(v >> 24)};
  write(addr, b, 4);
}

// ---------------------------------------------------------------------------------------------
// RunResult

std::string RunResult::describe() const {
  switch (status) {
    case RunStatus::kHalted:
      return "halted after " + std::to_string(instructions) + " instructions";
    case RunStatus::kWatchdog:
      return "watchdog: " + std::to_string(instructions) + " instructions without HALT (next pc " +
             hex(stop_pc) + ")";
    case RunStatus::kBlocked:
      return "blocked after " + std::to_string(instructions) +
             " instructions on the remote WAIT at pc " + hex(stop_pc) +
             ", which no neighbour has signalled far enough";
    case RunStatus::kFaulted:
      break;
  }
  return std::string("fault ") + fault_name(fault_code) + " at pc " + hex(fault_pc) + " (addr " +
         hex(fault_addr) + ", info " + hex(fault_info) + ")";
}

// ---------------------------------------------------------------------------------------------
// FunctionalModel

FunctionalModel::FunctionalModel(const ChipConfig& config)
    : config_(config), hbm_(config.hbm_bytes) {
  const int n = config_.n;
  if (n < 4 || n > 128 || (n & (n - 1)) != 0) {
    throw std::invalid_argument("ChipConfig: n = " + std::to_string(n) +
                                " is not a power of two in 4..128");
  }
  ub_.assign(config_.ub_bytes, 0);
  acc_.assign(static_cast<size_t>(config_.acc_rows) * n, 0);
  ub_written_.assign(config_.ub_bytes, 0);
  acc_written_.assign(config_.acc_rows, false);
  for (auto& v : v_) v.assign(n, 0);
}

void FunctionalModel::load_program(uint64_t addr, const std::vector<Instruction>& program) {
  std::vector<uint32_t> words;
  for (const auto& i : program) {
    const isa::Words w = isa::encode(i);
    words.insert(words.end(), w.begin(), w.end());
  }
  load_program(addr, words);
}

void FunctionalModel::load_program(uint64_t addr, const std::vector<uint32_t>& words) {
  for (size_t k = 0; k < words.size(); ++k) hbm_.write32(addr + 4 * k, words[k]);
}

bool FunctionalModel::ub_access_ok(int64_t addr, uint64_t len, uint64_t align, int64_t& bad) const {
  const int64_t a = static_cast<int64_t>(align);
  if (((addr % a) + a) % a != 0 || addr < 0) {
    bad = addr;
    return false;
  }
  if (static_cast<uint64_t>(addr) + len > config_.ub_bytes) {
    bad = std::max<int64_t>(addr, static_cast<int64_t>(config_.ub_bytes));
    return false;
  }
  return true;
}

void FunctionalModel::note_ub_read(uint64_t pc, uint64_t addr, uint64_t len, RunResult& r,
                                   bool& noted) {
  if (noted) return;
  const void* gap = std::memchr(ub_written_.data() + addr, 0, len);
  if (gap) {
    const uint64_t b = static_cast<const uint8_t*>(gap) - ub_written_.data();
    r.undefined_reads.push_back({pc, UndefinedRead::Space::kUb, b});
    noted = true;
  }
}

void FunctionalModel::note_acc_read(uint64_t pc, uint32_t row, RunResult& r, bool& noted) {
  if (noted || acc_written_[row]) return;
  r.undefined_reads.push_back({pc, UndefinedRead::Space::kAcc, row});
  noted = true;
}

void FunctionalModel::mark_ub_written(uint64_t addr, uint64_t len) {
  std::memset(ub_written_.data() + addr, 1, len);
}

void FunctionalModel::mem_read(isa::Space s, uint64_t addr, uint8_t* dst, uint64_t len) const {
  if (s == isa::Space::kHbm)
    hbm_.read(addr, dst, len);
  else
    std::memcpy(dst, ub_.data() + addr, len);
}

void FunctionalModel::mem_write(isa::Space s, uint64_t addr, const uint8_t* src, uint64_t len) {
  if (s == isa::Space::kHbm) {
    hbm_.write(addr, src, len);
  } else {
    std::memcpy(ub_.data() + addr, src, len);
    mark_ub_written(addr, len);
  }
}

void FunctionalModel::connect(isa::Link link, FunctionalModel* neighbour) {
  if (link == isa::Link::kLocal) throw std::invalid_argument("connect: kLocal is not a link");
  if (neighbour != nullptr) {
    const ChipConfig& o = neighbour->config();
    if (o.n != config_.n || o.ub_bytes != config_.ub_bytes || o.acc_rows != config_.acc_rows ||
        o.hbm_bytes != config_.hbm_bytes) {
      throw std::invalid_argument(
          "connect: the neighbour's configuration differs (N, UB, ACC "
          "or HBM size): remote addresses would mean other things");
    }
  }
  links_[static_cast<int>(link) - 1] = neighbour;
}

void FunctionalModel::start(uint64_t prog_addr) {
  // The doorbell: contract 4 — nothing but HBM carries over (UB and ACC keep their bytes but
  // are undefined: the written-tracking starts empty).
  for (auto& v : v_) std::fill(v.begin(), v.end(), 0u);
  sc_.fill(0);
  rc_.fill(0);
  signals_dispatched_.fill(0);
  signal_unit_.fill(-1);
  for (auto& walk : loops_) {
    for (auto& loop : walk) loop = {1, 0};
  }
  tiles_.clear();
  std::fill(ub_written_.begin(), ub_written_.end(), uint8_t{0});
  std::fill(acc_written_.begin(), acc_written_.end(), false);
  prog_addr_ = prog_addr;
  status_ = isa::STATUS_RUNNING;
  fault_code_ = fault_info_ = 0;
  fault_pc_ = fault_addr_ = 0;
  perf_macs_ = perf_instrs_ = 0;
  result_ = RunResult{};
  pc_ = prog_addr;
  loop_ = {};
}

FunctionalModel::Step FunctionalModel::step() {
  RunResult& r = result_;
  if (status_ != isa::STATUS_RUNNING) return Step::kEnded;
  const uint64_t pc = pc_;
  fault_ = {};
  bool faulted = false;
  bool halted = false;
  isa::Words w{};
  if (pc % isa::kInstructionBytes != 0 || pc + isa::kInstructionBytes > config_.hbm_bytes) {
    fault_.code = isa::FAULT_FETCH_RANGE;
    faulted = true;
  } else {
    for (int k = 0; k < 4; ++k) w[k] = hbm_.read32(pc + 4 * k);
    const isa::Decoded d = isa::decode(w, static_cast<uint32_t>(config_.n));
    // In a REPEAT body a HALT or another REPEAT is illegal (docs/isa.md, "Loops").
    if (!d.ok() || (loop_.active && (d.inst.op == Opcode::kHalt || d.inst.op == Opcode::kRepeat))) {
      fault_.code = isa::FAULT_ILLEGAL_INSTRUCTION;
      fault_.info = w[0];
      faulted = true;
    } else {
      // The instruction as this iteration executes it (outside a body: iteration 0).
      const Instruction inst = isa::at_iteration(d.inst, loop_.iter);
      // A remote WAIT not yet met: nothing happens until a neighbour signals (with no link up
      // it never can: exec faults SYNC_DEADLOCK).
      if (inst.op == Opcode::kWait && inst.remote && rc_[inst.sc] < inst.value &&
          (links_[0] != nullptr || links_[1] != nullptr)) {
        r.status = RunStatus::kBlocked;
        r.stop_pc = pc;
        return Step::kBlocked;
      }
      if (trace_) trace_(pc, inst);
      faulted = exec(pc, inst, w, r);
      halted = !faulted && inst.op == Opcode::kHalt;
      if (!faulted) ++r.instructions;
      if (!faulted && inst.op == Opcode::kRepeat) {
        loop_ = {true, pc + isa::kInstructionBytes, inst.len, inst.count, 0, 0};
        r.status = RunStatus::kHalted;  // not blocked now
        pc_ = pc + isa::kInstructionBytes;
        perf_instrs_ = r.instructions;
        return Step::kRan;
      }
    }
  }
  perf_instrs_ = r.instructions;
  perf_macs_ = r.macs;
  if (faulted) {
    r.status = RunStatus::kFaulted;
    r.fault_code = fault_.code;
    r.fault_pc = pc;
    r.fault_addr = fault_.addr;
    r.fault_info = fault_.info;
    status_ = isa::STATUS_FAULTED;
    fault_code_ = fault_.code;
    fault_pc_ = pc;
    fault_addr_ = fault_.addr;
    fault_info_ = fault_.info;
    irq_pending_ |= 2u;  // fault
    return Step::kEnded;
  }
  if (halted) {
    r.status = RunStatus::kHalted;
    status_ = isa::STATUS_HALTED;
    irq_pending_ |= 1u;  // done
    return Step::kEnded;
  }
  r.status = RunStatus::kHalted;  // not blocked now (the status once it ends is set above)
  pc_ = pc + isa::kInstructionBytes;
  if (loop_.active && ++loop_.pos == loop_.len) {
    // the body's last instruction: the next iteration, or on after the body
    loop_.pos = 0;
    if (++loop_.iter < loop_.count) {
      pc_ = loop_.start;
    } else {
      loop_ = {};
    }
  }
  return Step::kRan;
}

RunResult FunctionalModel::run(uint64_t prog_addr, uint64_t max_instructions) {
  start(prog_addr);
  while (true) {
    if (result_.instructions >= max_instructions) {
      result_.status = RunStatus::kWatchdog;
      result_.stop_pc = pc_;
      break;
    }
    const Step s = step();
    if (s == Step::kEnded) break;
    if (s == Step::kBlocked) break;  // alone, nothing can meet the wait: a FunctionalRing can
  }
  return result_;
}

bool FunctionalModel::exec(uint64_t pc, const Instruction& i, const isa::Words& w, RunResult& r) {
  switch (i.op) {
    case Opcode::kNop:
    case Opcode::kFence:  // every earlier instruction has completed: nothing to wait for here
    case Opcode::kHalt:
    case Opcode::kRepeat:  // step() runs the body
      return false;
    case Opcode::kIrq:
      irq_pending_ |= 4u;  // user
      irq_code_ = i.code;
      return false;
    case Opcode::kSignal:
      if (i.link != isa::Link::kLocal) {
        // The neighbour's remote counter; every earlier DMA write (to it too) has been done.
        FunctionalModel* nb = neighbour(i.link);
        if (nb == nullptr) {
          fault_ = {isa::FAULT_LINK_DOWN, 0, static_cast<uint32_t>(i.link)};
          return true;
        }
        ++nb->rc_[i.sc];
        return false;
      }
      // One signalling unit per counter in a program: another unit's SIGNAL could meet a WAIT
      // before the SIGNAL the program orders it after (docs/isa.md, Sync).
      if (signal_unit_[i.sc] >= 0 && signal_unit_[i.sc] != static_cast<int>(i.unit)) {
        fault_ = {isa::FAULT_SYNC_DEADLOCK, 0, i.sc};
        return true;
      }
      signal_unit_[i.sc] = static_cast<int>(i.unit);
      // Executed in program order, the signal's unit has completed everything before it.
      ++signals_dispatched_[i.sc];
      ++sc_[i.sc];
      return false;
    case Opcode::kWait:
      if (i.remote) {
        // Met (step() blocks until it is), unless no neighbour can ever signal.
        if (links_[0] == nullptr && links_[1] == nullptr) {
          fault_ = {isa::FAULT_SYNC_DEADLOCK, 0, i.sc};
          return true;
        }
        return false;
      }
      // The wait rule: the SIGNALs to this counter dispatched before the WAIT must reach its
      // value. In program order they have all executed, so a WAIT that passes is satisfied.
      if (signals_dispatched_[i.sc] < i.value) {
        fault_ = {isa::FAULT_SYNC_DEADLOCK, 0, i.sc};
        return true;
      }
      return false;
    case Opcode::kDmaLoop: {
      LoopRegs& l = loops_[static_cast<int>(i.walk)];
      const int lo = 2 * i.pair;
      l[lo] = {i.c0, i.s0};
      l[lo + 1] = {i.c1, i.s1};
      return false;
    }
    case Opcode::kDmaCopy:
      return exec_dma_copy(pc, i, r);
    case Opcode::kMxuLdw:
    case Opcode::kMxuMm:
      return exec_mxu(pc, i, w, r);
    case Opcode::kVpuLd:
    case Opcode::kVpuSt:
    case Opcode::kVpuOp:
    case Opcode::kVpuLi:
      return exec_vpu(pc, i, w, r);
  }
  return false;
}

// DMA.COPY with the DMA engine's fault rules (docs/memory.md, "DMA engine"): element size (4),
// count mismatch (3), alignment (5, source walk first) before anything moves; then the walks
// element by element, the first faulting element in element order wins (the source's at a tie)
// and exactly the elements before it are moved.
bool FunctionalModel::exec_dma_copy(uint64_t pc, const Instruction& i, RunResult& r) {
  if (i.link != isa::Link::kLocal && neighbour(i.link) == nullptr) {
    fault_ = {isa::FAULT_LINK_DOWN, 0, static_cast<uint32_t>(i.link)};  // at decode: first
    return true;
  }
  const unsigned e = i.elem_bytes;
  if (e != 2 && e != 4) {
    fault_ = {isa::FAULT_DMA, 0, 4};  // DMA_FAULT_ELEM_SIZE
    return true;
  }
  const auto make = [&](int walk, uint32_t base, isa::Space space) {
    dma::Descriptor d;
    d.base = base;
    d.elem_bytes = e;
    d.limit = space == isa::Space::kHbm ? config_.hbm_bytes : config_.ub_bytes;
    for (int k = 0; k < 4; ++k) {
      d.loops[k].count = static_cast<uint32_t>(loops_[walk][k][0]);
      d.loops[k].stride = loops_[walk][k][1];
    }
    return d;
  };
  const dma::Descriptor src = make(0, i.src, i.src_space);
  const dma::Descriptor dst = make(1, i.dst, i.dst_space);
  const auto elements = [](const dma::Descriptor& d) {
    uint64_t n = 1;
    for (const auto& l : d.loops) n *= l.count;
    return n;
  };
  if (elements(src) != elements(dst)) {
    fault_ = {isa::FAULT_DMA, 0, 3};  // DMA_FAULT_COUNT
    return true;
  }
  // The first misaligned element of a walk: the base, else base + stride_k for the innermost
  // loop k with a count above 1 whose stride is not a multiple of e.
  const auto misaligned = [&](const dma::Descriptor& d, int64_t& addr) {
    const int64_t base = static_cast<int64_t>(d.base);
    if (base % e != 0) {
      addr = base;
      return true;
    }
    for (const auto& l : d.loops) {
      if (l.count > 1 && l.stride % static_cast<int64_t>(e) != 0) {
        addr = base + l.stride;
        return true;
      }
    }
    return false;
  };
  int64_t bad = 0;
  if (misaligned(src, bad) || misaligned(dst, bad)) {
    fault_ = {isa::FAULT_DMA, static_cast<uint64_t>(bad), 5};  // DMA_FAULT_ALIGN
    return true;
  }
  const dma::Walk sw = dma::reference_walk(src);
  const dma::Walk dw = dma::reference_walk(dst);
  const uint64_t ns = sw.fault ? sw.addrs.size() : std::numeric_limits<uint64_t>::max();
  const uint64_t nd = dw.fault ? dw.addrs.size() : std::numeric_limits<uint64_t>::max();
  const uint64_t moved = std::min<uint64_t>({ns, nd, sw.addrs.size(), dw.addrs.size()});
  bool noted = false;
  // A remote copy writes the neighbour's memory (same configuration: the same limits).
  FunctionalModel* const target = i.link == isa::Link::kLocal ? this : neighbour(i.link);
  // Element by element in element order; a run of elements contiguous in both walks whose
  // source and destination bytes are disjoint moves as one block (the same bytes, faster).
  std::vector<uint8_t> block;
  for (uint64_t k = 0; k < moved;) {
    const uint64_t sa = sw.addrs[k], da = dw.addrs[k];
    uint64_t n = 1;
    while (k + n < moved && sw.addrs[k + n] == sa + n * e && dw.addrs[k + n] == da + n * e) ++n;
    const uint64_t len = n * e;
    const bool disjoint =
        target != this || i.src_space != i.dst_space || sa + len <= da || da + len <= sa;
    if (!disjoint) n = 1;  // one element: aligned, so either the same bytes or none
    if (i.src_space == isa::Space::kUb) note_ub_read(pc, sa, n * e, r, noted);
    block.resize(n * e);
    mem_read(i.src_space, sa, block.data(), n * e);
    target->mem_write(i.dst_space, da, block.data(), n * e);
    k += n;
  }
  if (sw.fault && ns <= nd) {
    fault_ = {isa::FAULT_DMA, static_cast<uint64_t>(sw.fault_addr), 1};  // DMA_FAULT_SRC_RANGE
    return true;
  }
  if (dw.fault) {
    fault_ = {isa::FAULT_DMA, static_cast<uint64_t>(dw.fault_addr), 2};  // DMA_FAULT_DST_RANGE
    return true;
  }
  return false;
}

// MXU.LDW / MXU.MM. Checks in this order, before anything executes: UB rows (in row order),
// then ACC rows, then (MXU.MM) a loaded tile.
bool FunctionalModel::exec_mxu(uint64_t pc, const Instruction& i, const isa::Words&, RunResult& r) {
  const int n = config_.n;
  const uint64_t row_bytes = 2ull * n;
  const uint32_t nrows = i.op == Opcode::kMxuLdw ? static_cast<uint32_t>(n) : i.rows;
  for (uint32_t t = 0; t < nrows; ++t) {
    int64_t bad;
    const int64_t a = static_cast<int64_t>(i.addr) + static_cast<int64_t>(t) * i.stride;
    if (!ub_access_ok(a, row_bytes, row_bytes, bad)) {
      fault_ = {isa::FAULT_UB_RANGE, static_cast<uint64_t>(i.addr), 0};  // the instruction's addr
      return true;
    }
  }
  const auto read_rows = [&](uint32_t count) {
    std::vector<uint16_t> m(static_cast<size_t>(count) * n);
    bool noted = false;
    for (uint32_t t = 0; t < count; ++t) {
      const uint64_t a =
          static_cast<uint64_t>(static_cast<int64_t>(i.addr) + static_cast<int64_t>(t) * i.stride);
      note_ub_read(pc, a, row_bytes, r, noted);
      for (int c = 0; c < n; ++c) {
        m[static_cast<size_t>(t) * n + c] =
            static_cast<uint16_t>(ub_[a + 2 * c] | ub_[a + 2 * c + 1] << 8);
      }
    }
    return m;
  };
  if (i.op == Opcode::kMxuLdw) {
    if (!tiles_.empty()) {  // one loaded tile may wait for its MXU.MM, no more
      fault_ = {isa::FAULT_MXU_TILES, 0, 0};
      return true;
    }
    std::vector<uint16_t> tile = read_rows(static_cast<uint32_t>(n));
    if (i.transpose) {  // W[k][c] = row c's element k
      std::vector<uint16_t> t(tile.size());
      for (int k = 0; k < n; ++k)
        for (int c = 0; c < n; ++c) t[size_t(k) * n + c] = tile[size_t(c) * n + k];
      tile = std::move(t);
    }
    tiles_.push_back(std::move(tile));
    return false;
  }
  // the last row's ACC row: acc_row + (rows - 1) acc_stride
  if (static_cast<uint64_t>(i.acc_row) + uint64_t{i.rows - 1u} * i.acc_stride + 1 >
      config_.acc_rows) {
    fault_ = {isa::FAULT_ACC_RANGE, std::max<uint64_t>(i.acc_row, config_.acc_rows), 0};
    return true;
  }
  if (tiles_.empty()) {
    fault_ = {isa::FAULT_MXU_NO_WEIGHTS, 0, 0};
    return true;
  }
  const std::vector<uint16_t> w = std::move(tiles_.front());
  tiles_.pop_front();
  const std::vector<uint16_t> a = read_rows(i.rows);
  // One K-tile: column sums from +0 in the order k = 0..N-1 (numerics.md), on the host's float
  // unit: bit-identical to sw/numerics/mxu_ref (mxu_tile.h says why; test_functional_model checks).
  std::vector<uint32_t> c(static_cast<size_t>(i.rows) * n);
  mxu_tile_matmul(n, i.rows, a.data(), w.data(), c.data());
  bool noted = false;
  for (uint32_t t = 0; t < i.rows; ++t) {
    const uint32_t row = i.acc_row + t * i.acc_stride;
    uint32_t* dst = &acc_[static_cast<size_t>(row) * n];
    if (i.acc_mode == isa::AccMode::kAcc) note_acc_read(pc, row, r, noted);
    for (int col = 0; col < n; ++col) {
      const uint32_t v = c[static_cast<size_t>(t) * n + col];
      dst[col] = i.acc_mode == isa::AccMode::kAcc ? fp::add(dst[col], v) : v;
    }
    acc_written_[row] = true;
  }
  r.macs += static_cast<uint64_t>(i.rows) * n * n;
  return false;
}

bool FunctionalModel::exec_vpu(uint64_t pc, const Instruction& i, const isa::Words&, RunResult& r) {
  const int n = config_.n;
  if (i.op == Opcode::kVpuLi) {
    std::fill(v_[i.vd].begin(), v_[i.vd].end(), i.imm);
    return false;
  }
  if (i.op == Opcode::kVpuOp) {
    vpu_op(i);
    return false;
  }
  const bool load = i.op == Opcode::kVpuLd;
  std::vector<uint32_t>& reg = v_[load ? i.vd : i.vs];
  if (i.kind == isa::Kind::kAcc) {
    if (i.addr >= config_.acc_rows) {
      fault_ = {isa::FAULT_ACC_RANGE, i.addr, 0};
      return true;
    }
    uint32_t* row = &acc_[static_cast<size_t>(i.addr) * n];
    if (load) {
      bool noted = false;
      note_acc_read(pc, i.addr, r, noted);
      std::copy(row, row + n, reg.begin());
    } else {
      std::copy(reg.begin(), reg.end(), row);
      acc_written_[i.addr] = true;
    }
    return false;
  }
  const uint64_t eb = i.kind == isa::Kind::kUbF32 ? 4 : 2;
  const uint64_t len = eb * n;
  int64_t bad;
  if (!ub_access_ok(i.addr, len, len, bad)) {
    fault_ = {isa::FAULT_UB_RANGE, static_cast<uint64_t>(bad), 0};
    return true;
  }
  uint8_t* p = &ub_[i.addr];
  if (load) {
    bool noted = false;
    note_ub_read(pc, i.addr, len, r, noted);
    for (int l = 0; l < n; ++l) {
      if (eb == 4) {
        uint32_t v;
        std::memcpy(&v, p + 4 * l, 4);  // little-endian host
        reg[l] = v;
      } else {
        // bf16 widened exactly (a NaN becomes the canonical NaN, as bf16_to_fp32 does).
        reg[l] = fp::bf16_to_fp32(static_cast<uint16_t>(p[2 * l] | p[2 * l + 1] << 8));
      }
    }
  } else {
    for (int l = 0; l < n; ++l) {
      if (eb == 4) {
        std::memcpy(p + 4 * l, &reg[l], 4);
      } else {
        const uint16_t h = fp::fp32_to_bf16(reg[l]);
        p[2 * l] = static_cast<uint8_t>(h);
        p[2 * l + 1] = static_cast<uint8_t>(h >> 8);
      }
    }
    mark_ub_written(i.addr, len);
  }
  return false;
}

// VPU.OP, lane by lane with host binary32 arithmetic. Operands each funct reads
// (isa::funct_operands; the others must be 0):
//   va, vb:      add sub mul div min max cmpeq cmplt cmple iadd iand ior ixor shl shr sra
//   va:          sqrt i2f f2i f2bf rsum rmax
//   va, vb, vc:  sel addmax
//   va, vb, vc, imm: seleq selne sellt seleqh, max4 argmax4 (imm: the fourth register)
//   va, vb, imm: shlor
//   va, imm:     bcast bfx
void FunctionalModel::vpu_op(const Instruction& i) {
  const int n = config_.n;
  const std::vector<uint32_t>& a = v_[i.va];
  const std::vector<uint32_t>& b = v_[i.vb];
  const std::vector<uint32_t>& c = v_[i.vc];
  std::vector<uint32_t> d(n);
  const auto f = [](uint32_t x) { return fp::f32(x); };
  const auto out = [](float x) { return fp::canonical(fp::bits(x)); };
  const auto mask = [](bool t) { return t ? 0xFFFFFFFFu : 0u; };
  if (i.funct == Funct::kRSum || i.funct == Funct::kRMax || i.funct == Funct::kBcast) {
    uint32_t v;
    if (i.funct == Funct::kRSum) {
      v = reduce_tree(a, [](uint32_t x, uint32_t y) { return fp::add(x, y); });
    } else if (i.funct == Funct::kRMax) {
      v = reduce_tree(a, f_max);
    } else {
      v = a[i.imm];  // imm < N: decode checked it
    }
    std::fill(d.begin(), d.end(), v);
    v_[i.vd] = d;
    return;
  }
  for (int l = 0; l < n; ++l) {
    const uint32_t x = a[l], y = b[l];
    uint32_t z = 0;
    switch (i.funct) {
      case Funct::kAdd:
        z = out(f(x) + f(y));
        break;
      case Funct::kSub:
        z = out(f(x) - f(y));
        break;
      case Funct::kMul:
        z = out(f(x) * f(y));
        break;
      case Funct::kDiv:
        z = out(f(x) / f(y));
        break;
      case Funct::kSqrt:
        z = out(std::sqrt(f(x)));
        break;
      case Funct::kMin:
        z = f_min(x, y);
        break;
      case Funct::kMax:
        z = f_max(x, y);
        break;
      case Funct::kCmpEq:
        z = mask(f(x) == f(y));
        break;
      case Funct::kCmpLt:
        z = mask(f(x) < f(y));
        break;
      case Funct::kCmpLe:
        z = mask(f(x) <= f(y));
        break;
      case Funct::kSel:
        z = c[l] != 0 ? x : y;
        break;
      case Funct::kI2F:
        z = out(static_cast<float>(static_cast<int32_t>(x)));
        break;
      case Funct::kF2I:
        z = f2i(x);
        break;
      case Funct::kF2Bf:
        z = static_cast<uint32_t>(fp::fp32_to_bf16(x)) << 16;
        break;
      case Funct::kIAdd:
        z = x + y;
        break;
      case Funct::kIAnd:
        z = x & y;
        break;
      case Funct::kIOr:
        z = x | y;
        break;
      case Funct::kIXor:
        z = x ^ y;
        break;
      case Funct::kShl:
        z = x << (y & 31);
        break;
      case Funct::kShr:
        z = x >> (y & 31);
        break;
      case Funct::kSra:
        z = static_cast<uint32_t>(static_cast<int32_t>(x) >> (y & 31));
        break;
      case Funct::kSelEq:
        z = f(x) == f(y) ? c[l] : i.imm;
        break;
      case Funct::kSelNe:
        z = f(x) == f(y) ? i.imm : c[l];
        break;
      case Funct::kSelLt:
        z = f(x) < f(y) ? c[l] : i.imm;
        break;
      case Funct::kBfx:  // decode checked imm < 2^10
        z = (x >> (i.imm & 31)) & (0xFFFFFFFFu >> (31 - ((i.imm >> 5) & 31)));
        break;
      case Funct::kShlOr:  // imm < 32
        z = x | (y << i.imm);
        break;
      case Funct::kSelEqH:  // each 16-bit half: bit patterns equal ? vc's : imm (< 2^16)
        z = ((x >> 16) == (y >> 16) ? c[l] & 0xFFFF0000u : i.imm << 16) |
            ((x & 0xFFFFu) == (y & 0xFFFFu) ? c[l] & 0xFFFFu : i.imm);
        break;
      case Funct::kAddMax:  // the sum rounded, then max's rules
        z = f_max(out(f(x) + f(y)), c[l]);
        break;
      case Funct::kMax4:  // decode checked imm < 16
        z = f_max4(x, y, c[l], v_[i.imm][l]);
        break;
      case Funct::kArgMax4: {  // the first of va, vb, vc equal to max4's, as 0.0 .. 2.0; else 3.0
        const uint32_t m = f_max4(x, y, c[l], v_[i.imm][l]);
        z = f(x) == f(m) ? fp::bits(0.0f)
            : f(y) == f(m) ? fp::bits(1.0f)
            : f(c[l]) == f(m) ? fp::bits(2.0f)
                              : fp::bits(3.0f);
        break;
      }
      default:
        break;  // reductions and bcast above
    }
    d[l] = z;
  }
  v_[i.vd] = d;
}

uint32_t FunctionalModel::csr_read(uint32_t offset) const {
  const uint64_t channels =
      std::max<uint64_t>(1, config_.hbm_bytes >> chip_params::HBM_PC_ADDR_BITS);
  switch (offset) {
    case isa::CSR_ID:
      return isa::CSR_ID_VALUE;
    case isa::CSR_CONFIG0:
      return static_cast<uint32_t>(log2_floor(config_.n)) |
             static_cast<uint32_t>(log2_floor(kQueueDepth)) << 8 |
             static_cast<uint32_t>(log2_floor(channels)) << 16;
    case isa::CSR_CONFIG1:
      return static_cast<uint32_t>(config_.ub_bytes);
    case isa::CSR_CONFIG2:
      return config_.acc_rows;
    case isa::CSR_PROG_ADDR:
      return static_cast<uint32_t>(prog_addr_);
    case isa::CSR_STATUS:
      return status_;
    case isa::CSR_FAULT_CODE:
      return fault_code_;
    case isa::CSR_FAULT_PC:
      return static_cast<uint32_t>(fault_pc_);
    case isa::CSR_FAULT_ADDR:
      return static_cast<uint32_t>(fault_addr_);
    case isa::CSR_FAULT_INFO:
      return fault_info_;
    case isa::CSR_IRQ_ENABLE:
      return irq_enable_;
    case isa::CSR_IRQ_PENDING:
      return irq_pending_;
    case isa::CSR_IRQ_CODE:
      return irq_code_;
    default:
      break;
  }
  const uint32_t macs = isa::CSR_PERF_BASE + 8 * isa::PERF_MACS;
  const uint32_t instrs = isa::CSR_PERF_BASE + 8 * isa::PERF_INSTRS;
  if (offset == macs) return static_cast<uint32_t>(perf_macs_);
  if (offset == macs + 4) return static_cast<uint32_t>(perf_macs_ >> 32);
  if (offset == instrs) return static_cast<uint32_t>(perf_instrs_);
  if (offset == instrs + 4) return static_cast<uint32_t>(perf_instrs_ >> 32);
  return 0;  // DOORBELL (write-only), the timing counters, unmapped offsets
}

void FunctionalModel::csr_write(uint32_t offset, uint32_t value) {
  switch (offset) {
    case isa::CSR_PROG_ADDR:
      prog_addr_ = value;
      break;
    case isa::CSR_IRQ_ENABLE:
      irq_enable_ = value & 7u;
      break;
    case isa::CSR_IRQ_PENDING:
      irq_pending_ &= ~value;
      break;
    default:
      break;
  }
}

}  // namespace tessera::functional
