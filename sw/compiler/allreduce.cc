// The ring all-reduce program (tessera/allreduce.h; docs/multichip.md explains the protocol).
#include "tessera/allreduce.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sw/compiler/reroll.h"

namespace tessera::compiler {

using isa::Instruction;
using isa::Opcode;

namespace {

// Counters. Local: SC3 own piece loaded (DMA), SC4 piece added (VPU), SC5 piece stored (DMA).
// Remote: RC0 pieces arrived from prev, RC1 receive slots freed by next, RC2 all-gather
// chunks arrived from prev.
constexpr uint8_t kScOwn = 3, kScAdded = 4, kScStored = 5;
constexpr uint8_t kRcPiece = 0, kRcFree = 1, kRcChunk = 2;

class Emitter {
 public:
  std::vector<Instruction> prog;
  uint32_t len = 0;          // the loop registers' current element count (0: not set)
  bool outer_dirty = false;  // loops 2 and 3 hold a region's counts (copy() resets them)

  void wait(isa::Unit u, uint8_t sc, uint32_t value, bool remote = false) {
    Instruction i;
    i.op = Opcode::kWait;
    i.unit = u;
    i.sc = sc;
    i.value = value;
    i.remote = remote;
    prog.push_back(i);
  }
  void signal(isa::Unit u, uint8_t sc, isa::Link link = isa::Link::kLocal) {
    Instruction i;
    i.op = Opcode::kSignal;
    i.unit = u;
    i.sc = sc;
    i.link = link;
    prog.push_back(i);
  }
  // Loops 2 and 3 of both walks to count 1: the program may be a block inside a larger one
  // (the training step) whose copies left other values there.
  void reset_outer_loops() {
    for (isa::Walk w : {isa::Walk::kSrc, isa::Walk::kDst}) {
      Instruction l;
      l.op = Opcode::kDmaLoop;
      l.walk = w;
      l.pair = 1;
      l.c0 = 1;
      l.c1 = 1;
      prog.push_back(l);
    }
  }
  // A contiguous copy of `elems` fp32 (loops 0 and 1; loops 2 and 3 are count 1).
  void copy(isa::Space ss, uint32_t src, isa::Space ds, uint32_t dst, uint32_t elems,
            isa::Link link = isa::Link::kLocal) {
    if (outer_dirty) {
      reset_outer_loops();
      outer_dirty = false;
    }
    if (elems != len) {
      for (isa::Walk w : {isa::Walk::kSrc, isa::Walk::kDst}) {
        Instruction l;
        l.op = Opcode::kDmaLoop;
        l.walk = w;
        l.pair = 0;
        l.c0 = static_cast<uint16_t>(elems);
        l.s0 = 4;
        l.c1 = 1;
        l.s1 = 0;
        prog.push_back(l);
      }
      len = elems;
    }
    Instruction c;
    c.op = Opcode::kDmaCopy;
    c.src_space = ss;
    c.dst_space = ds;
    c.elem_bytes = 4;
    c.src = src;
    c.dst = dst;
    c.link = link;
    prog.push_back(c);
  }
  void halt() {
    Instruction h;
    h.op = Opcode::kHalt;
    prog.push_back(h);
  }
  // A copy of one gather region to the same addresses on `next` (all four loops set).
  void copy_region(const GatherRegion& g) {
    for (isa::Walk w : {isa::Walk::kSrc, isa::Walk::kDst})
      for (uint8_t pair = 0; pair < 2; ++pair) {
        Instruction l;
        l.op = Opcode::kDmaLoop;
        l.walk = w;
        l.pair = pair;
        const auto loop = [&](size_t i) {
          return i < g.loops.size() ? g.loops[i] : std::pair<uint32_t, int32_t>{1, 0};
        };
        l.c0 = static_cast<uint16_t>(loop(2 * pair).first);
        l.s0 = loop(2 * pair).second;
        l.c1 = static_cast<uint16_t>(loop(2 * pair + 1).first);
        l.s1 = loop(2 * pair + 1).second;
        prog.push_back(l);
      }
    len = 0;             // loop 0 is no longer a contiguous copy's
    outer_dirty = true;  // nor are loops 2 and 3 count 1
    Instruction c;
    c.op = Opcode::kDmaCopy;
    c.src_space = isa::Space::kHbm;
    c.dst_space = isa::Space::kHbm;
    c.elem_bytes = static_cast<uint8_t>(g.elem_bytes);
    c.src = g.addr;
    c.dst = g.addr;
    c.link = isa::Link::kNext;
    prog.push_back(c);
  }
  // VPU.LD (vd) / VPU.ST (vs) of N fp32 lanes at UB `addr`.
  void vpu_mem(Opcode op, int v, uint32_t addr) {
    Instruction i;
    i.op = op;
    i.kind = isa::Kind::kUbF32;
    (op == Opcode::kVpuLd ? i.vd : i.vs) = static_cast<uint8_t>(v);
    i.addr = addr;
    prog.push_back(i);
  }
  void vpu_add(int vd, int va, int vb) {
    Instruction i;
    i.op = Opcode::kVpuOp;
    i.funct = isa::Funct::kAdd;
    i.vd = static_cast<uint8_t>(vd);
    i.va = static_cast<uint8_t>(va);
    i.vb = static_cast<uint8_t>(vb);
    prog.push_back(i);
  }
};

struct Plan {
  uint32_t chunk = 0;      // elements per chunk
  uint32_t piece = 0;      // elements per piece (the last of a chunk may be shorter)
  uint32_t pieces = 0;     // per chunk
  uint32_t rx_slots = 2;   // receive slots
  uint32_t own_slots = 2;  // own-piece buffers (loaded ahead of the adds)
  uint32_t out_slots = 2;  // sum buffers (stored or forwarded behind the adds)
  uint32_t skew = 3;       // D: the send order's skew between steps (ring_allreduce_program)
  uint32_t piece_len(uint32_t j) const { return j + 1 < pieces ? piece : chunk - j * piece; }
};

// Pieces of 5 KiB by default: small enough that the link, the DMA's local copies and the adds
// pipeline, large enough that each copy's start-up is paid rarely (docs/multichip.md), with up
// to eight receive slots so that a sender runs ahead of its neighbour's adds.
constexpr uint32_t kDefaultPieceBytes = 5120, kMaxRxSlots = 8;

Plan plan(const AllReduceSpec& s) {
  const auto bad = [](const std::string& why) {
    throw std::invalid_argument("ring_allreduce_program: " + why);
  };
  if (s.chips < 1) bad("chips must be at least 1");
  if (s.rank < 0 || s.rank >= s.chips) bad("rank must be in 0 … chips − 1");
  if (s.n < 4 || (s.n & (s.n - 1)) != 0) bad("n must be a power of two >= 4");
  const uint32_t vec = 4u * static_cast<uint32_t>(s.n);
  if (s.hbm_addr % 32 != 0) bad("hbm_addr must be 32-byte aligned");
  if (s.elems == 0 || s.elems % (static_cast<uint32_t>(s.chips) * s.n) != 0) {
    bad("elems must be a positive multiple of chips × n (allreduce_padded_elems)");
  }
  if (s.ub_base % vec != 0) bad("ub_base must be a multiple of 4·n bytes");
  Plan p;
  p.chunk = s.elems / static_cast<uint32_t>(s.chips);
  // At least six piece buffers: two receive slots, two own pieces, two sums.
  uint32_t piece_bytes =
      s.piece_bytes ? s.piece_bytes : std::min(kDefaultPieceBytes, s.ub_bytes / 6);
  piece_bytes = piece_bytes / vec * vec;
  if (piece_bytes == 0 || 6ull * piece_bytes > s.ub_bytes) {
    bad("UB scratch of " + std::to_string(s.ub_bytes) + " bytes cannot hold six pieces of " +
        std::to_string(piece_bytes ? piece_bytes : vec) + " bytes");
  }
  p.piece = std::min<uint32_t>(
      {piece_bytes / 4, p.chunk, 65535u / static_cast<uint32_t>(s.n) * static_cast<uint32_t>(s.n)});
  p.pieces = (p.chunk + p.piece - 1) / p.piece;
  const uint32_t slots = s.ub_bytes / (p.piece * 4);
  // A sum is forwarded at most skew·(P − 1) − 1 positions after its add, and its buffer must be
  // released by a send emitted within R − 1 positions of the add that reuses it: R + Q must
  // reach skew·(P − 1). Largest skew first, four own and sum buffers where the scratch has 12
  // pieces, then two; receive slots up to 8, more when the ring needs them.
  const uint32_t need1 = static_cast<uint32_t>(s.chips - 1);
  const auto fits = [&](uint32_t d, uint32_t oq) {
    if (oq == 4 && slots < 12) return false;
    const uint32_t r = std::min(slots - 2 * oq, std::max(kMaxRxSlots, d * need1));
    if (r < 2 || r + oq < d * need1) return false;
    p.skew = d;
    p.own_slots = p.out_slots = oq;
    p.rx_slots = r;
    return true;
  };
  bool found = false;
  for (uint32_t d = 3; d >= 1 && !found; --d) found = fits(d, 4) || fits(d, 2);
  if (!found) {
    const uint32_t least = 4 + std::max(2u, need1 > 2 ? need1 - 2 : 0u);
    bad("UB scratch of " + std::to_string(s.ub_bytes) + " bytes holds " + std::to_string(slots) +
        " pieces of " + std::to_string(p.piece * 4) + " bytes: " + std::to_string(s.chips) +
        " chips need at least " + std::to_string(least));
  }
  return p;
}

}  // namespace

uint32_t allreduce_padded_elems(uint32_t elems, int chips, int n) {
  const uint32_t q = static_cast<uint32_t>(chips) * static_cast<uint32_t>(n);
  return (elems + q - 1) / q * q;
}

uint64_t allreduce_link_bytes(const AllReduceSpec& s) {
  const Plan p = plan(s);
  return (s.reduce_scatter_only ? 1ull : 2ull) * (s.chips - 1) * p.chunk * 4;
}

std::vector<Instruction> ring_allreduce_program(const AllReduceSpec& s) {
  const Plan p = plan(s);
  Emitter e;
  const int P = s.chips, r = s.rank;
  if (P > 1) {
    e.reset_outer_loops();
    const uint32_t pb = p.piece * 4, R = p.rx_slots, O = p.own_slots, Q = p.out_slots;
    // UB scratch: R receive slots, O own pieces, Q sums.
    const auto rx = [&](uint64_t k) { return s.ub_base + static_cast<uint32_t>(k % R) * pb; };
    const auto own = [&](uint64_t k) {
      return s.ub_base + (R + static_cast<uint32_t>(k % O)) * pb;
    };
    const auto out = [&](uint64_t k) {
      return s.ub_base + (R + O + static_cast<uint32_t>(k % Q)) * pb;
    };
    const auto chunk_at = [&](int c, uint32_t j) {
      return s.hbm_addr + static_cast<uint32_t>(c) * p.chunk * 4 + j * p.piece * 4;
    };
    const auto mod = [&](int x) { return ((x % P) + P) % P; };
    const uint32_t K = static_cast<uint32_t>(P - 1) * p.pieces;  // pieces received in all
    // The pieces in the order every chip sends (and so receives) them: position k is piece j
    // of reduce-scatter step s. A partial sum is forwarded straight from the UB (chip r adds
    // piece j of step s and sends that sum as piece j of step s + 1), so the order is skewed:
    // by j + s·D, later steps first where they tie, which puts about D·(P − 1) positions —
    // the sends and adds of other pieces — between receiving a piece and forwarding its sum.
    // With two chips there is one step and the order is j.
    const uint32_t D = p.skew;
    std::vector<std::pair<uint32_t, int>> order;  // position → (j, s)
    std::vector<uint32_t> pos_of(K);              // s·pieces + j → position
    for (uint32_t t = 0; order.size() < K; ++t)
      for (int st = P - 2; st >= 0; --st) {
        const uint32_t d = static_cast<uint32_t>(st) * D;
        if (t < d || t - d >= p.pieces) continue;
        pos_of[static_cast<uint32_t>(st) * p.pieces + (t - d)] =
            static_cast<uint32_t>(order.size());
        order.emplace_back(t - d, st);
      }
    const auto piece_of = [&](uint32_t k) { return order[k].first; };
    const auto step_of = [&](uint32_t k) { return order[k].second; };
    // the position whose sum position k sends (steps >= 1)
    const auto source = [&](uint32_t k) {
      return pos_of[static_cast<uint32_t>(step_of(k) - 1) * p.pieces + piece_of(k)];
    };
    const auto recv_chunk = [&](uint32_t k) { return mod(r - step_of(k) - 1); };
    // An out buffer is released (SC5, by the DMA) when its sum has been stored (last step) or
    // forwarded; releases need not come in position order, so the VPU waits for the release's
    // ordinal among SC5's signals.
    uint32_t released = 0, sent = 0, added = 0;  // SC5 signals, sends, add blocks emitted
    std::vector<uint32_t> release_ord(K, 0);
    const auto release = [&](uint32_t k) {
      e.signal(isa::Unit::kDma, kScStored);
      release_ord[k] = ++released;
    };
    // retire position k once added: its receive slot goes back to prev; a final sum (chunk
    // r + 1) is stored, and all-gather step 0 sends it to next's HBM straight from the UB.
    const auto retire = [&](uint32_t k) {
      const uint32_t j = piece_of(k);
      e.wait(isa::Unit::kDma, kScAdded, k + 1);
      e.signal(isa::Unit::kDma, kRcFree, isa::Link::kPrev);
      if (step_of(k) == P - 2) {
        e.copy(isa::Space::kUb, out(k), isa::Space::kHbm, chunk_at(recv_chunk(k), j),
               p.piece_len(j));
        if (!s.reduce_scatter_only) {
          e.copy(isa::Space::kUb, out(k), isa::Space::kHbm, chunk_at(recv_chunk(k), j),
                 p.piece_len(j), isa::Link::kNext);
          if (P > 2) e.signal(isa::Unit::kDma, kRcChunk, isa::Link::kNext);
        }
        release(k);
      }
    };
    // send position k into next's receive slot k % R once next has granted it (RC1 >= k + 1:
    // a credit per slot): step 0 my own chunk r from HBM, later steps the sum I made at
    // source(k), from its out buffer once added (which releases the buffer).
    const auto send = [&](uint32_t k) {
      const uint32_t j = piece_of(k);
      e.wait(isa::Unit::kDma, kRcFree, k + 1, true);
      if (step_of(k) == 0) {
        e.copy(isa::Space::kHbm, chunk_at(r, j), isa::Space::kUb, rx(k), p.piece_len(j),
               isa::Link::kNext);
      } else {
        e.wait(isa::Unit::kDma, kScAdded, source(k) + 1);
        e.copy(isa::Space::kUb, out(source(k)), isa::Space::kUb, rx(k), p.piece_len(j),
               isa::Link::kNext);
      }
      e.signal(isa::Unit::kDma, kRcPiece, isa::Link::kNext);
      if (step_of(k) > 0) release(source(k));
      ++sent;
    };
    // Sends run ahead of the piece being added, up to `last`, in position order; a forward only
    // once its add is emitted (the wait rule). A credit for position m needs next to have
    // retired m − R, which next emits after its own sends up to m − 1 only (this iteration's
    // first call stops at k + R − 2; position k + R − 1 goes after retire(k − 1)); a forward
    // waits for an add of an earlier position; so no two chips wait for each other.
    const auto send_ahead = [&](uint32_t last) {
      while (sent < K && sent <= last && (step_of(sent) == 0 || source(sent) < added)) send(sent);
    };
    // My R receive slots are free from here on (the program before this block is done with
    // the UB): tell prev.
    for (uint32_t i = 0; i < R; ++i) e.signal(isa::Unit::kDma, kRcFree, isa::Link::kPrev);
    // my own piece of the chunk received at position m, loaded ahead of its add (its buffer is
    // free once position m − O is added: that wait needs only earlier positions, as send's)
    uint32_t loaded = 0;
    const auto load_ahead = [&](uint32_t last) {
      for (; loaded < K && loaded <= last; ++loaded) {
        if (loaded >= O) e.wait(isa::Unit::kDma, kScAdded, loaded - O + 1);
        e.copy(isa::Space::kHbm, chunk_at(recv_chunk(loaded), piece_of(loaded)), isa::Space::kUb,
               own(loaded), p.piece_len(piece_of(loaded)));
        e.signal(isa::Unit::kDma, kScOwn);
      }
    };
    // Reduce-scatter.
    for (uint32_t k = 0; k < K; ++k) {
      const uint32_t len = p.piece_len(piece_of(k));
      send_ahead(k + R - 2);
      load_ahead(k + O - 2);
      if (k >= 1) retire(k - 1);
      load_ahead(k + O - 1);
      send_ahead(k + R - 1);
      // add: received + own, vector by vector, into out buffer k % Q once position k − Q has
      // released it (its release is emitted before: the plan's slot counts guarantee it)
      e.wait(isa::Unit::kVpu, kRcPiece, k + 1, true);
      e.wait(isa::Unit::kVpu, kScOwn, k + 1);
      if (k >= Q) {
        if (release_ord[k - Q] == 0)
          throw std::logic_error("ring_allreduce_program: out buffer of position " +
                                 std::to_string(k - Q) + " not released before position " +
                                 std::to_string(k) + " (too few sum buffers)");
        e.wait(isa::Unit::kVpu, kScStored, release_ord[k - Q]);
      }
      for (uint32_t v = 0; v < len / s.n; ++v) {
        const uint32_t off = v * 4u * s.n;
        e.vpu_mem(Opcode::kVpuLd, 1, rx(k) + off);
        e.vpu_mem(Opcode::kVpuLd, 2, own(k) + off);
        e.vpu_add(3, 1, 2);
        e.vpu_mem(Opcode::kVpuSt, 3, out(k) + off);
      }
      e.signal(isa::Unit::kVpu, kScAdded);
      ++added;
    }
    retire(K - 1);
    // All-gather: chunk (r + 1 − step), finished here or received last step, into next's HBM.
    // Step 0's pieces went out from the UB as the last reduce-scatter step stored them; with
    // more than two chips each piece is signalled (RC2 counts pieces) and step s forwards
    // piece j from HBM as soon as prev's piece j of step s − 1 is in (pieces in step-major
    // order on every chip), so the steps pipeline instead of waiting for whole chunks.
    if (!s.reduce_scatter_only) {
      const uint32_t gather_signals = P > 2 ? static_cast<uint32_t>(P - 1) * p.pieces : 1u;
      if (P == 2) e.signal(isa::Unit::kDma, kRcChunk, isa::Link::kNext);
      for (int step = 1; step < P - 1; ++step)
        for (uint32_t j = 0; j < p.pieces; ++j) {
          e.wait(isa::Unit::kDma, kRcChunk, static_cast<uint32_t>(step - 1) * p.pieces + j + 1,
                 true);
          e.copy(isa::Space::kHbm, chunk_at(mod(r + 1 - step), j), isa::Space::kHbm,
                 chunk_at(mod(r + 1 - step), j), p.piece_len(j), isa::Link::kNext);
          e.signal(isa::Unit::kDma, kRcChunk, isa::Link::kNext);
        }
      // Every signal sent to this chip is consumed before HALT (none may arrive after it).
      e.wait(isa::Unit::kDma, kRcChunk, gather_signals, true);
    }
    e.wait(isa::Unit::kDma, kRcFree, K + R, true);
  }
  e.halt();
  return reroll(e.prog);  // the per-vector adds as REPEAT loops (docs/compiler.md)
}

std::vector<Instruction> ring_allgather_program(
    int chips, int rank, const std::vector<std::vector<GatherRegion>>& chunks) {
  const auto bad = [](const std::string& why) {
    throw std::invalid_argument("ring_allgather_program: " + why);
  };
  if (chips < 1) bad("chips must be at least 1");
  if (rank < 0 || rank >= chips) bad("rank must be in 0 … chips − 1");
  if (chunks.size() != static_cast<size_t>(chips)) bad("one region list per chip is needed");
  for (const auto& c : chunks)
    for (const GatherRegion& g : c) {
      if (g.loops.empty() || g.loops.size() > 4) bad("a region has 1 to 4 loops");
      if (g.elem_bytes != 2 && g.elem_bytes != 4) bad("elements are 2 or 4 bytes");
      if (g.addr % static_cast<uint32_t>(g.elem_bytes)) bad("a region's address is unaligned");
      for (const auto& l : g.loops)
        if (l.first == 0 || l.first > 65535) bad("a loop count is outside 1 … 65535");
    }
  Emitter e;
  const int P = chips;
  const auto mod = [&](int x) { return ((x % P) + P) % P; };
  for (int step = 0; step < P - 1; ++step) {
    if (step >= 1) e.wait(isa::Unit::kDma, kRcChunk, static_cast<uint32_t>(step), true);
    for (const GatherRegion& g : chunks[static_cast<size_t>(mod(rank + 1 - step))])
      e.copy_region(g);
    e.signal(isa::Unit::kDma, kRcChunk, isa::Link::kNext);
  }
  if (P > 1) e.wait(isa::Unit::kDma, kRcChunk, static_cast<uint32_t>(P - 1), true);
  e.halt();
  return e.prog;
}

}  // namespace tessera::compiler
