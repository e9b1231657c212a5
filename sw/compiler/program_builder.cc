// ProgramBuilder: instruction emission with automatic sync (program_builder.h).
#include "sw/compiler/program_builder.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>

#include "tessera/chip_params.h"

namespace tessera::compiler {

uint64_t DmaWalk::elements() const {
  uint64_t e = 1;
  for (const auto& l : loops) e *= l.first;
  return e;
}

void DmaWalk::span(int e, uint64_t& lo, uint64_t& hi) const {
  int64_t min_off = 0, max_off = 0;
  for (const auto& l : loops) {
    const int64_t reach = static_cast<int64_t>(l.first - 1) * l.second;
    (reach < 0 ? min_off : max_off) += reach;
  }
  lo = static_cast<uint64_t>(static_cast<int64_t>(base) + min_off);
  hi = static_cast<uint64_t>(static_cast<int64_t>(base) + max_off + e);
}

namespace {
// The element indices (exclusive ends) where a walk's runs end, in order: each call to next()
// returns the next one. Runs lie in one iteration of loop 0, within one 32-byte word, and are
// single elements when loop 0 is not contiguous (tpu_dma_agen).
class RunEnds {
 public:
  RunEnds(const DmaWalk& w, int e) : w_(w), e_(e) {
    count0_ = w.loops.empty() ? 1 : w.loops[0].first;
    contiguous_ = !w.loops.empty() && w.loops[0].second == e && count0_ > 1;
    idx_.assign(w.loops.size(), 0);
  }
  // The next run's end; `word`: the 32-byte word it lies in.
  uint64_t next(uint64_t* word = nullptr) {
    uint64_t len = 1;
    const uint64_t addr = address();
    if (word) *word = addr / 32;
    if (contiguous_) {
      const uint64_t in_word = (32 - addr % 32) / static_cast<uint64_t>(e_);
      len = std::max<uint64_t>(1, std::min<uint64_t>(in_word, count0_ - idx_[0]));
    }
    advance(len);
    return pos_;
  }

 private:
  uint64_t address() const {
    int64_t a = static_cast<int64_t>(w_.base);
    for (size_t l = 0; l < idx_.size(); ++l)
      a += static_cast<int64_t>(idx_[l]) * w_.loops[l].second;
    return static_cast<uint64_t>(a);
  }
  void advance(uint64_t len) {
    pos_ += len;
    if (idx_.empty()) return;
    idx_[0] += len;  // len never crosses loop 0's end
    for (size_t l = 0; l + 1 < idx_.size() && idx_[l] >= w_.loops[l].first; ++l) {
      idx_[l] = 0;
      ++idx_[l + 1];
    }
  }
  const DmaWalk& w_;
  int e_;
  uint64_t count0_ = 1, pos_ = 0;
  bool contiguous_ = false;
  std::vector<uint64_t> idx_;
};
}  // namespace

uint64_t dma_words(const DmaWalk& w, int e) {
  RunEnds r(w, e);
  const uint64_t total = w.elements();
  uint64_t words = 0, last = ~0ull, word = 0;
  for (uint64_t end = 0; end < total;) {
    end = r.next(&word);
    if (word != last) ++words;
    last = word;
  }
  return words;
}

uint64_t dma_read_words(const DmaWalk& w, int e) {
  RunEnds r(w, e);
  const uint64_t total = w.elements();
  std::array<uint64_t, chip_params::DMA_READ_SLOTS> tag{};
  uint64_t reads = 0, word = 0;
  for (uint64_t end = 0; end < total;) {
    end = r.next(&word);
    const uint64_t kept = std::min<uint64_t>(reads, tag.size());
    if (std::find(tag.begin(), tag.begin() + kept, word) != tag.begin() + kept) continue;
    tag[reads++ % tag.size()] = word;  // round-robin, as the slots fill
  }
  return reads;
}

uint64_t dma_run_cycles(const DmaWalk& src, const DmaWalk& dst, int e) {
  // A gather moves an element a cycle: no need to walk it.
  const bool s_contig = !src.loops.empty() && src.loops[0].second == e && src.loops[0].first > 1;
  const bool d_contig = !dst.loops.empty() && dst.loops[0].second == e && dst.loops[0].first > 1;
  if (!s_contig || !d_contig) return src.elements();
  RunEnds a(src, e), b(dst, e);
  const uint64_t total = src.elements();
  uint64_t ea = a.next(), eb = b.next(), cycles = 0;
  for (;;) {
    ++cycles;  // the piece ending at the nearer run end
    const uint64_t m = std::min(ea, eb);
    if (m >= total) break;
    if (ea == m) ea = a.next();
    if (eb == m) eb = b.next();
  }
  return cycles;
}

ProgramBuilder::ProgramBuilder(int n, uint64_t ub_bytes, uint32_t acc_rows)
    : n_(n),
      ub_bytes_(ub_bytes),
      acc_rows_(acc_rows),
      ub_((ub_bytes + kGranule - 1) / kGranule),
      acc_(acc_rows) {
  for (auto& walk : loop_regs_) walk.fill({1u, 0});
}

void ProgramBuilder::check_ub(uint64_t lo, uint64_t hi, const char* what) const {
  if (hi > ub_bytes_ || lo >= hi)
    throw std::logic_error(std::string("compiler: ") + what + " UB range [" + std::to_string(lo) +
                           ", " + std::to_string(hi) + ") outside the " +
                           std::to_string(ub_bytes_) + "-byte UB");
}

void ProgramBuilder::depend(Unit consumer, int producer, uint64_t seq, bool reads_ok) {
  const int c = static_cast<int>(consumer);
  if (producer == c) return;  // a unit executes its own instructions in order
  auto& sig = signal_at_[producer];
  const auto& reads = signal_reads_[producer];
  // The first SIGNAL of the producer that covers instruction `seq` (signal k covers seq < at[k])
  // and is complete enough: a reads-only one serves a consumer that writes what it read.
  auto it = std::upper_bound(sig.begin(), sig.end(), seq);
  while (it != sig.end() && reads[it - sig.begin()] && !reads_ok) ++it;
  if (it == sig.end()) {
    signal(static_cast<Unit>(producer), reads_ok && producer == static_cast<int>(Unit::kMxu));
    it = sig.end() - 1;
  }
  const uint32_t count = static_cast<uint32_t>(it - sig.begin()) + 1;
  if (waited_[c][producer] >= count) return;
  Instruction w;
  w.op = isa::Opcode::kWait;
  w.unit = consumer;
  w.sc = static_cast<uint8_t>(producer);
  w.value = count;
  program_.push_back(w);
  waited_[c][producer] = count;
  ++stats_.waits;
  ++stats_.per_unit[c];
}

void ProgramBuilder::signal(Unit unit, bool reads) {
  const int u = static_cast<int>(unit);
  auto& sig = signal_at_[u];
  // nothing new since the last one, which is at least as complete
  if (!sig.empty() && sig.back() == seq_[u] && (reads || !signal_reads_[u].back())) return;
  Instruction s;
  s.op = isa::Opcode::kSignal;
  s.unit = unit;
  s.sc = static_cast<uint8_t>(u);
  s.reads = reads;
  program_.push_back(s);
  sig.push_back(seq_[u]);
  signal_reads_[u].push_back(reads);
  ++stats_.signals;
  ++stats_.per_unit[u];
}

void ProgramBuilder::await(Unit unit, const std::vector<Footprint>& fp) {
  // Every earlier conflicting access on another unit.
  for (const auto& f : fp) {
    auto& recs = records(f.space);
    const uint64_t g0 = f.space == Footprint::Space::kUb ? f.lo / kGranule : f.lo;
    const uint64_t g1 = f.space == Footprint::Space::kUb ? (f.hi + kGranule - 1) / kGranule : f.hi;
    for (uint64_t g = g0; g < g1; ++g) {
      const Record& r = recs[g];
      if (r.writer_unit >= 0) depend(unit, r.writer_unit, r.writer_seq, false);
      // overwriting what another unit read: its reads must be done — for the UB, which the
      // MXU reads before its results (SIGNAL ..., reads), not for the ACC, which it reads to
      // accumulate at the array's far end
      if (f.write)
        for (int p = 0; p < 3; ++p)
          if (r.reader_seq[p] >= 0)
            depend(unit, p, static_cast<uint64_t>(r.reader_seq[p]),
                   f.space == Footprint::Space::kUb);
    }
  }
}

void ProgramBuilder::emit(const Instruction& inst, Unit unit, const std::vector<Footprint>& fp) {
  const int u = static_cast<int>(unit);
  await(unit, fp);  // dependencies first
  program_.push_back(inst);
  ++stats_.per_unit[u];
  if (unit == Unit::kVpu) stats_.vpu_wide_cycles += vpu_issue_cycles(inst, n_) - 1;
  const uint64_t seq = seq_[u]++;
  for (const auto& f : fp) {
    auto& recs = records(f.space);
    const uint64_t g0 = f.space == Footprint::Space::kUb ? f.lo / kGranule : f.lo;
    const uint64_t g1 = f.space == Footprint::Space::kUb ? (f.hi + kGranule - 1) / kGranule : f.hi;
    for (uint64_t g = g0; g < g1; ++g) {
      Record& r = recs[g];
      if (f.write) {
        r.writer_unit = u;
        r.writer_seq = seq;
        r.reader_seq = {-1, -1, -1};
      } else {
        r.reader_seq[u] = static_cast<int64_t>(seq);
      }
    }
  }
}

void ProgramBuilder::set_loops(isa::Walk walk, const DmaWalk& w) {
  if (w.loops.size() > 4) throw std::logic_error("compiler: a DMA walk has at most 4 loops");
  std::array<std::pair<uint32_t, int32_t>, 4> want;
  want.fill({1u, 0});
  for (size_t k = 0; k < w.loops.size(); ++k) {
    if (w.loops[k].first < 1 || w.loops[k].first > 65535)
      throw std::logic_error("compiler: DMA loop count out of range");
    want[k] = w.loops[k];
  }
  auto& have = loop_regs_[static_cast<int>(walk)];
  for (int pair = 0; pair < 2; ++pair) {
    const int l = 2 * pair;
    // A loop with count 1 never advances, so its stride does not matter.
    auto same = [&](int k) {
      return have[k].first == want[k].first &&
             (want[k].first == 1 || have[k].second == want[k].second);
    };
    if (same(l) && same(l + 1)) continue;
    Instruction i;
    i.op = isa::Opcode::kDmaLoop;
    i.walk = walk;
    i.pair = static_cast<uint8_t>(pair);
    i.c0 = static_cast<uint16_t>(want[l].first);
    i.s0 = want[l].second;
    i.c1 = static_cast<uint16_t>(want[l + 1].first);
    i.s1 = want[l + 1].second;
    program_.push_back(i);
    ++stats_.per_unit[0];
    have[l] = want[l];
    have[l + 1] = want[l + 1];
  }
}

void ProgramBuilder::dma_copy(const DmaWalk& src, const DmaWalk& dst, int e) {
  if (src.elements() != dst.elements())
    throw std::logic_error("compiler: DMA walks of different lengths");
  std::vector<Footprint> fp;
  for (const DmaWalk* w : {&src, &dst}) {
    if (w->space != isa::Space::kUb) continue;
    Footprint f;
    w->span(e, f.lo, f.hi);
    check_ub(f.lo, f.hi, "DMA");
    f.write = (w == &dst);
    fp.push_back(f);
  }
  set_loops(isa::Walk::kSrc, src);
  set_loops(isa::Walk::kDst, dst);
  Instruction i;
  i.op = isa::Opcode::kDmaCopy;
  count_copy(src, dst, e, isa::Link::kLocal);
  i.src_space = src.space;
  i.dst_space = dst.space;
  i.elem_bytes = static_cast<uint8_t>(e);
  i.src = static_cast<uint32_t>(src.base);
  i.dst = static_cast<uint32_t>(dst.base);
  emit(i, Unit::kDma, fp);
}

void ProgramBuilder::mxu_ldw(uint32_t addr, int32_t stride, bool transpose) {
  const uint64_t row = 2ull * n_;
  Footprint f{Footprint::Space::kUb, addr,
              static_cast<uint64_t>(static_cast<int64_t>(addr) + int64_t{stride} * (n_ - 1)) + row,
              false};
  check_ub(f.lo, f.hi, "MXU.LDW");
  Instruction i;
  i.op = isa::Opcode::kMxuLdw;
  i.transpose = transpose;
  i.addr = addr;
  i.stride = stride;
  emit(i, Unit::kMxu, {f});
}

void ProgramBuilder::mxu_mm(bool accumulate, uint32_t addr, int32_t stride, uint32_t rows,
                            uint32_t acc_row, uint32_t acc_stride) {
  const uint64_t row = 2ull * n_;
  Footprint a{
      Footprint::Space::kUb, addr,
      static_cast<uint64_t>(static_cast<int64_t>(addr) + int64_t{stride} * (rows - 1)) + row,
      false};
  check_ub(a.lo, a.hi, "MXU.MM");
  if (acc_stride < 1 || acc_stride > 256)
    throw std::logic_error("compiler: MXU.MM acc_stride outside 1..256");
  // the rows written: acc_row + t acc_stride (the footprint covers the rows between as well)
  const uint64_t acc_end = uint64_t{acc_row} + uint64_t{rows - 1} * acc_stride + 1;
  if (acc_end > acc_rows_) throw std::logic_error("compiler: MXU.MM ACC rows out of range");
  Footprint acc{Footprint::Space::kAcc, acc_row, acc_end, true};
  std::vector<Footprint> fp{a, acc};
  if (accumulate) fp.push_back({Footprint::Space::kAcc, acc_row, acc_end, false});
  Instruction i;
  i.op = isa::Opcode::kMxuMm;
  count_mm(rows);
  i.acc_mode = accumulate ? isa::AccMode::kAcc : isa::AccMode::kSet;
  i.addr = addr;
  i.stride = stride;
  i.rows = static_cast<uint16_t>(rows);
  i.acc_row = static_cast<uint16_t>(acc_row);
  i.acc_stride = static_cast<uint16_t>(acc_stride);
  emit(i, Unit::kMxu, fp);
}

void ProgramBuilder::vpu_ld(isa::Kind kind, int vd, uint32_t addr) {
  Footprint f;
  if (kind == isa::Kind::kAcc) {
    if (addr >= acc_rows_) throw std::logic_error("compiler: VPU.LD ACC row out of range");
    f = {Footprint::Space::kAcc, addr, addr + 1ull, false};
  } else {
    f = {Footprint::Space::kUb, addr, addr + vpu_bytes(kind, n_), false};
    check_ub(f.lo, f.hi, "VPU.LD");
    if (addr % vpu_bytes(kind, n_)) throw std::logic_error("compiler: misaligned VPU.LD");
  }
  Instruction i;
  i.op = isa::Opcode::kVpuLd;
  i.kind = kind;
  i.vd = static_cast<uint8_t>(vd);
  i.addr = addr;
  emit(i, Unit::kVpu, {f});
}

void ProgramBuilder::vpu_st(isa::Kind kind, int vs, uint32_t addr) {
  Footprint f;
  if (kind == isa::Kind::kAcc) {
    if (addr >= acc_rows_) throw std::logic_error("compiler: VPU.ST ACC row out of range");
    f = {Footprint::Space::kAcc, addr, addr + 1ull, true};
  } else {
    f = {Footprint::Space::kUb, addr, addr + vpu_bytes(kind, n_), true};
    check_ub(f.lo, f.hi, "VPU.ST");
    if (addr % vpu_bytes(kind, n_)) throw std::logic_error("compiler: misaligned VPU.ST");
  }
  Instruction i;
  i.op = isa::Opcode::kVpuSt;
  i.kind = kind;
  i.vs = static_cast<uint8_t>(vs);
  i.addr = addr;
  emit(i, Unit::kVpu, {f});
}

void ProgramBuilder::vpu_op(isa::Funct f, int vd, int va, int vb, int vc, uint32_t imm) {
  const isa::FunctOperands ops = isa::funct_operands(f);
  Instruction i;
  i.op = isa::Opcode::kVpuOp;
  i.funct = f;
  i.vd = static_cast<uint8_t>(vd);
  i.va = ops.va ? static_cast<uint8_t>(va) : 0;
  i.vb = ops.vb ? static_cast<uint8_t>(vb) : 0;
  i.vc = ops.vc ? static_cast<uint8_t>(vc) : 0;
  i.imm = ops.imm ? imm : 0;
  emit(i, Unit::kVpu, {});
}

void ProgramBuilder::vpu_li(int vd, uint32_t bits) {
  Instruction i;
  i.op = isa::Opcode::kVpuLi;
  i.vd = static_cast<uint8_t>(vd);
  i.imm = bits;
  emit(i, Unit::kVpu, {});
}

void ProgramBuilder::vpu_lif(int vd, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  vpu_li(vd, bits);
}

void ProgramBuilder::irq(uint32_t code) {
  Instruction i;
  i.op = isa::Opcode::kIrq;
  i.code = code;
  program_.push_back(i);
}

void ProgramBuilder::fenced_block(const std::vector<Instruction>& block) {
  count_block(block);
  Instruction fence;
  fence.op = isa::Opcode::kFence;
  program_.push_back(fence);
  program_.insert(program_.end(), block.begin(), block.end());
  program_.push_back(fence);
  for (auto& walk : loop_regs_) walk.fill({0u, 0});  // count 0: never a register's value
}

void ProgramBuilder::count_copy(const DmaWalk& src, const DmaWalk& dst, int e, isa::Link link) {
  stats_.dma_elements += src.elements();
  stats_.dma_cycles += dma_run_cycles(src, dst, e);
  if (src.space == isa::Space::kHbm) stats_.hbm_bytes += 32 * dma_read_words(src, e);
  // A remote copy writes a flit a destination word into the neighbour; the ring is symmetric,
  // so as many arrive here, into this chip's HBM when the walk is in HBM.
  const uint64_t dst_words = dma_words(dst, e);
  if (dst.space == isa::Space::kHbm) stats_.hbm_bytes += 32 * dst_words;
  if (link != isa::Link::kLocal) stats_.ici_flits += dst_words;
}

void ProgramBuilder::count_mm(uint32_t rows) {
  stats_.mxu_rows += rows;
  stats_.mxu_cycles += mxu_tile_cycles(n_, rows);
}

void ProgramBuilder::count_block(const std::vector<Instruction>& block) {
  // The DMA's loop registers as the block sets them (it sets every loop its copies use).
  std::array<std::array<std::pair<uint32_t, int32_t>, 4>, 2> regs;
  for (auto& w : regs) w.fill({1u, 0});
  for (const Instruction& i : isa::expand_repeats(block)) {
    switch (i.op) {
      case isa::Opcode::kWait:
      case isa::Opcode::kSignal:
        ++stats_.per_unit[static_cast<size_t>(i.unit)];
        (i.op == isa::Opcode::kWait ? stats_.waits : stats_.signals) += 1;
        break;
      case isa::Opcode::kDmaLoop: {
        auto& w = regs[static_cast<size_t>(i.walk)];
        w[2 * i.pair] = {i.c0, i.s0};
        w[2 * i.pair + 1] = {i.c1, i.s1};
        ++stats_.per_unit[0];
        break;
      }
      case isa::Opcode::kDmaCopy: {
        DmaWalk src{i.src_space, i.src, {}}, dst{i.dst_space, i.dst, {}};
        for (int l = 0; l < 4; ++l) {
          src.loops.push_back(regs[0][l]);
          dst.loops.push_back(regs[1][l]);
        }
        count_copy(src, dst, i.elem_bytes, i.link);
        ++stats_.per_unit[0];
        break;
      }
      case isa::Opcode::kMxuMm:
        count_mm(i.rows);
        [[fallthrough]];
      case isa::Opcode::kMxuLdw:
        ++stats_.per_unit[1];
        break;
      case isa::Opcode::kVpuLd:
      case isa::Opcode::kVpuSt:
      case isa::Opcode::kVpuOp:
      case isa::Opcode::kVpuLi:
        ++stats_.per_unit[2];
        stats_.vpu_wide_cycles += vpu_issue_cycles(i, n_) - 1;
        break;
      default:
        break;
    }
  }
}

std::vector<Instruction> ProgramBuilder::finish() {
  Instruction h;
  h.op = isa::Opcode::kHalt;
  program_.push_back(h);
  stats_.instructions = program_.size();
  return std::move(program_);
}

}  // namespace tessera::compiler
