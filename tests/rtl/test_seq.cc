// The sequencer (tpu_seq) with its program in a C++ memory behind the fetch port (random
// latency, back-pressure, an error beyond the end) and three C++ units that take instructions
// with random back-pressure and spend random cycles on each. Checked against docs/isa.md: each
// unit receives exactly its instructions, in program order, with their PCs; a SIGNAL counts
// only once its unit has finished everything before it (with the reads flag: once the unit has
// read the operands of everything before it — and such a SIGNAL does let a WAIT through before
// its unit finishes), and a WAIT holds its unit until the counter is reached (checked from the
// units' read and completion times); FENCE and HALT wait for all
// work; every static fault (illegal opcode, reserved bits, field values, UB and ACC ranges, an
// MXU.MM without a tile, the wait rule, fetch beyond memory) and a unit's fault stop the chip
// with the right code, PC and address, abort the units, never hang, and the next start runs.
#include <gtest/gtest.h>

#include <array>
#include <deque>
#include <map>
#include <random>
#include <vector>

#include "Vtpu_seq.h"
#include "harness/sim_ctrl.h"
#include "harness/vl_bits.h"
#include "tessera/chip_params.h"
#include "tessera/isa.h"
#include "tessera/isa_gen.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

using Instr = std::array<uint32_t, 4>;
constexpr int kN = 4, kUbBytes = 4096,
              kAccRows = chip_params::SMALL_ACC_ROWS;  // the Vtpu_seq build
constexpr int kDma = 0, kMxu = 1, kVpu = 2;

Instr op(uint32_t w0, uint32_t w1 = 0, uint32_t w2 = 0, uint32_t w3 = 0) {
  return {w0, w1, w2, w3};
}
Instr wait_i(int unit, int sc, uint32_t v) { return op(isa::OP_WAIT | unit << 8 | sc << 12, v); }
Instr signal_i(int unit, int sc, bool reads = false) {
  return op(isa::OP_SIGNAL | unit << 8 | sc << 12 | (reads ? 1u : 0u) << 16);
}
Instr halt_i() { return op(isa::OP_HALT); }
Instr copy_i(uint32_t src, uint32_t dst) {
  return op(isa::OP_DMA_COPY | 0u << 8 | 1u << 9 | 2u << 12, src, dst);
}
Instr loop_i(int walk, uint16_t c0, int32_t s0) {
  return op(isa::OP_DMA_LOOP | walk << 8 | uint32_t(c0) << 16, uint32_t(s0), 1, 0);
}
Instr ldw_i(uint32_t addr, int32_t stride) { return op(isa::OP_MXU_LDW, addr, uint32_t(stride)); }
Instr mm_i(uint32_t addr, int32_t stride, uint16_t rows, uint16_t acc) {
  return op(isa::OP_MXU_MM | 1u << 8, addr, uint32_t(stride), rows | uint32_t(acc) << 16);
}
Instr vop_i(uint32_t funct, int vd, int va, int vb) {
  return op(isa::OP_VPU_OP | funct << 8 | vd << 16 | va << 20 | vb << 24);
}
Instr vld_i(int kind, int vd, uint32_t addr, int32_t step = 0) {
  return op(isa::OP_VPU_LD | kind << 8 | vd << 16, addr, uint32_t(step));
}
Instr repeat_i(uint32_t count, uint32_t len) { return op(isa::OP_REPEAT, count, len); }

class Seq : public ::testing::Test {
 protected:
  Seq() : sim_(test::current_test_name()), rng_(test::test_seed()) {
    auto& m = sim_.top();
    m.start_i = 0;
    m.prog_addr_i = 0;
    m.fetch_req_ready_i = 0;
    m.fetch_rd_valid_i = 0;
    m.fetch_rd_data_i = {};
    m.fetch_rd_err_i = 0;
    m.unit_ready_i = 0;
    m.unit_idle_i = 7;
    m.unit_rd_idle_i = 7;
    m.unit_fault_i = 0;
    m.unit_fault_code_i = 0;
    m.unit_fault_pc_i = {};
    m.unit_fault_addr_i = {};
    m.unit_fault_info_i = {};
    m.link_up_i = 0;  // one chip: remote operations fault LINK_DOWN (tests/rtl/test_ring.cc)
    m.rsig_ready_i = 0;
    m.tx_idle_i = 1;  // no link transmit queue here: FENCE/HALT wait only for the units
    m.rc_inc_i = 0;
    m.rc_sc_i = 0;
    sim_.reset();
  }

  // The program memory: instructions at `base`, 16 bytes each; reads at or beyond `limit`
  // return an error.
  void load(uint32_t base, const std::vector<Instr>& prog) {
    for (size_t i = 0; i < prog.size(); ++i) mem_[base + 16 * i] = prog[i];
  }

  struct Received {
    uint32_t pc;
    Instr ins;
    uint64_t taken, read, done;  // cycles: taken, its operands read, completed
  };
  struct Unit {
    std::vector<Received> got;
    int busy_left = 0;  // cycles of the current instruction
    int read_left = 0;  // cycles until it has read its operands (<= busy_left)
    int ready_pct = 70;
    int fault_on_pc = -1;  // raise a fault when this PC is taken
    bool aborted = false;
  };

  struct Outcome {
    int status;
    uint32_t code, pc, addr, info;
    uint64_t cycles;
    int done_pulses, fault_pulses;
    uint64_t retired;  // instr_retired_o pulses
  };

  Outcome run(uint32_t prog_addr, uint64_t limit = 200000) {
    auto& m = sim_.top();
    m.prog_addr_i = prog_addr;
    m.start_i = 1;
    sim_.tick();
    m.start_i = 0;
    Outcome o{};
    for (auto& u : units_) u = Unit{u.got, 0, 0, u.ready_pct, u.fault_on_pc, false};
    const uint64_t start = sim_.cycle();
    for (uint64_t c = 0; c < limit; ++c) {
      step(o);
      if (m.status_o == isa::STATUS_HALTED || m.status_o == isa::STATUS_FAULTED) break;
    }
    o.status = m.status_o;
    o.code = m.fault_code_o;
    o.pc = m.fault_pc_o;
    o.addr = m.fault_addr_o;
    o.info = m.fault_info_o;
    o.cycles = sim_.cycle() - start;
    EXPECT_NE(o.status, int(isa::STATUS_RUNNING)) << "the sequencer did not finish";
    return o;
  }

  void step(Outcome& o) {
    auto& m = sim_.top();
    const uint64_t now = sim_.cycle();
    m.tx_idle_i = now >= tx_busy_until_;
    // fetch slave: a response due now?
    m.fetch_rd_valid_i = 0;
    if (!fetches_.empty() && fetches_.front().first <= now && rng_() % 100 < 80) {
      const uint32_t a = fetches_.front().second;
      m.fetch_rd_valid_i = 1;
      m.fetch_rd_err_i = a >= limit_;
      for (int h = 0; h < 2; ++h) {
        const auto it = mem_.find(a + 16 * h);
        const Instr ins = it == mem_.end() ? Instr{0, 0, 0, 0} : it->second;
        for (int w = 0; w < 4; ++w) m.fetch_rd_data_i[4 * h + w] = ins[w];
      }
    }
    m.fetch_req_ready_i = rng_() % 100 < 60;
    // units
    uint32_t ready = 0, idle = 0, rd_idle = 0, fault = 0;
    for (int u = 0; u < 3; ++u) {
      Unit& un = units_[u];
      if (un.busy_left == 0 && rng_() % 100 < un.ready_pct) ready |= 1u << u;
      if (un.busy_left == 0) idle |= 1u << u;
      if (un.read_left == 0) rd_idle |= 1u << u;
    }
    m.unit_ready_i = ready;
    m.unit_idle_i = idle;
    m.unit_rd_idle_i = rd_idle;
    m.unit_fault_i = 0;
    sim_.eval();
    if (m.fetch_rd_valid_i) fetches_.pop_front();
    if (m.fetch_req_valid_o && m.fetch_req_ready_i) {
      EXPECT_EQ(m.fetch_req_addr_o % 32, 0u);
      fetches_.push_back({now + 3 + rng_() % 20, m.fetch_req_addr_o});
    }
    if (m.done_o) ++o.done_pulses;
    if (m.fault_event_o) ++o.fault_pulses;
    if (m.instr_retired_o) ++o.retired;
    for (int u = 0; u < 3; ++u) {
      Unit& un = units_[u];
      if (m.abort_o) un.aborted = true;
      if (un.read_left > 0 && --un.read_left == 0) un.got.back().read = now;
      if (un.busy_left > 0) {
        if (--un.busy_left == 0) un.got.back().done = now;
        if (m.abort_o) {
          un.busy_left = 0;
          un.got.back().done = now;
        }
      }
      if ((m.unit_valid_o >> u & 1) && (ready >> u & 1)) {
        Received r;
        r.pc = m.unit_pc_o[u];
        for (int w = 0; w < 4; ++w) r.ins[w] = m.unit_instr_o[4 * u + w];
        r.taken = now;
        r.read = now;
        r.done = now;
        un.got.push_back(r);
        un.busy_left = 1 + static_cast<int>(rng_() % 12);
        un.read_left = 1 + static_cast<int>(rng_() % static_cast<uint64_t>(un.busy_left));
        if (static_cast<int>(r.pc) == un.fault_on_pc) fault |= 1u << u;
      }
    }
    if (fault) {
      // the unit reports its fault the next cycle (a one-cycle pulse), then idles
      pending_fault_ = fault;
    }
    sim_.tick();
    if (pending_fault_) {
      auto& mm = sim_.top();
      for (int u = 0; u < 3; ++u) {
        if (pending_fault_ >> u & 1) {
          mm.unit_fault_i = 1u << u;
          put_bits(mm.unit_fault_code_i, 4 * u, 4, isa::FAULT_DMA);
          mm.unit_fault_pc_i[u] = static_cast<uint32_t>(units_[u].fault_on_pc);
          mm.unit_fault_addr_i[u] = 0xABCD00;
          mm.unit_fault_info_i[u] = 2;
          units_[u].busy_left = 0;
          units_[u].read_left = 0;
          units_[u].got.back().done = sim_.cycle();
        }
      }
      pending_fault_ = 0;
      mm.fetch_rd_valid_i = 0;  // nothing else happens in this extra cycle
      mm.fetch_req_ready_i = 0;
      mm.unit_idle_i = 7;
      mm.unit_rd_idle_i = 7;
      mm.unit_ready_i = 0;
      sim_.tick();
      mm.unit_fault_i = 0;
    }
  }

  SimCtrl<Vtpu_seq> sim_;
  std::mt19937_64 rng_;
  std::map<uint32_t, Instr> mem_;
  uint32_t limit_ = 1u << 20;
  std::deque<std::pair<uint64_t, uint32_t>> fetches_;  // due cycle, address
  std::array<Unit, 3> units_;
  uint32_t pending_fault_ = 0;
  uint64_t tx_busy_until_ = 0;  // the links' transmit queues hold flits until this cycle
};

int unit_of(const Instr& i) {
  const uint32_t opc = i[0] & 0xFF;
  if (opc == isa::OP_WAIT || opc == isa::OP_SIGNAL) return (i[0] >> 8) & 3;
  if (opc >> 4 == 2) return kDma;
  if (opc >> 4 == 3) return kMxu;
  if (opc >> 4 == 4) return kVpu;
  return -1;
}
bool is_sync(const Instr& i) {
  const uint32_t opc = i[0] & 0xFF;
  return opc == isa::OP_WAIT || opc == isa::OP_SIGNAL;
}

// A random legal program: unit instructions and SIGNAL/WAIT pairs that obey the wait rule.
std::vector<Instr> random_program(std::mt19937_64& rng, int len) {
  std::vector<Instr> p;
  std::array<uint32_t, 16> signals{};
  std::array<int, 16> owner;  // one signalling unit per counter (docs/isa.md)
  owner.fill(-1);
  int tiles = 0;
  while (static_cast<int>(p.size()) < len) {
    const int k = static_cast<int>(rng() % 10);
    const int u = static_cast<int>(rng() % 3);
    if (k == 0) {
      const int sc = static_cast<int>(rng() % 4);
      if (owner[sc] < 0) owner[sc] = u;
      p.push_back(signal_i(owner[sc], sc, rng() % 2 == 0));  // half of them reads-only
      ++signals[sc];
    } else if (k == 1) {
      const int sc = static_cast<int>(rng() % 4);
      if (signals[sc] > 0) p.push_back(wait_i(u, sc, 1 + rng() % signals[sc]));
    } else if (k == 2 && rng() % 4 == 0) {
      p.push_back(op(isa::OP_FENCE));
    } else if (u == kDma) {
      p.push_back(rng() % 2 ? copy_i(rng() % 4096, rng() % 4096)
                            : loop_i(static_cast<int>(rng() % 2), 1 + rng() % 100, 4));
    } else if (u == kMxu) {
      if (tiles == 0) {
        p.push_back(ldw_i(8 * (rng() % 64), 8));
        ++tiles;
      } else {
        p.push_back(mm_i(8 * (rng() % 64), 8, 1 + rng() % 32, rng() % 32));
        --tiles;
      }
    } else {
      p.push_back(rng() % 2 ? vop_i(isa::VF_ADD, 1, 2, 3) : vld_i(2, 4, rng() % kAccRows));
    }
  }
  p.push_back(halt_i());
  return p;
}

// Every unit gets its instructions in program order with their PCs; sync holds as specified.
TEST_F(Seq, RandomProgramsDispatchInOrderAndSyncHolds) {
  int early = 0;  // WAITs a reads-only SIGNAL let through before its unit had finished
  for (int trial = 0; trial < 100; ++trial) {
    for (auto& u : units_) u.got.clear();
    const auto prog = random_program(rng_, 40 + static_cast<int>(rng_() % 80));
    const uint32_t base = 0x1000 + 16 * static_cast<uint32_t>(rng_() % 64);  // some 16 mod 32
    load(base, prog);
    const Outcome o = run(base);
    ASSERT_EQ(o.status, int(isa::STATUS_HALTED))
        << "trial " << trial << " code " << o.code << " pc 0x" << std::hex << o.pc;
    EXPECT_EQ(o.done_pulses, 1);
    // expected per unit: the non-sync instructions, in order
    std::array<std::vector<std::pair<uint32_t, Instr>>, 3> want;
    for (size_t i = 0; i < prog.size(); ++i) {
      const int u = unit_of(prog[i]);
      if (u >= 0 && !is_sync(prog[i])) want[u].push_back({base + 16 * uint32_t(i), prog[i]});
    }
    for (int u = 0; u < 3; ++u) {
      ASSERT_EQ(units_[u].got.size(), want[u].size()) << "unit " << u << " trial " << trial;
      for (size_t i = 0; i < want[u].size(); ++i) {
        EXPECT_EQ(units_[u].got[i].pc, want[u][i].first) << "unit " << u << " #" << i;
        EXPECT_EQ(units_[u].got[i].ins, want[u][i].second) << "unit " << u << " #" << i;
      }
    }
    // Sync: for every WAIT (unit W, counter c, value v), the first instruction of W after it
    // was taken no earlier than the completion of the work before the v-th SIGNAL to c.
    std::map<uint32_t, const Received*> by_pc;
    for (auto& un : units_) {
      for (auto& r : un.got) by_pc[r.pc] = &r;
    }
    std::array<std::vector<uint64_t>, 16> signal_ready;  // per counter: when each could count
    std::array<std::vector<uint64_t>, 16> signal_done;   // ... had its unit finished before it
    for (size_t i = 0; i < prog.size(); ++i) {
      const uint32_t opc = prog[i][0] & 0xFF;
      const int u = unit_of(prog[i]);
      const int sc = (prog[i][0] >> 12) & 15;
      if (opc == isa::OP_SIGNAL) {
        // completion of the unit's instructions before it, or with the reads flag the time
        // they had read their operands
        const bool reads = (prog[i][0] >> 16 & 1) != 0;
        uint64_t t = 0, t_done = 0;
        for (size_t j = 0; j < i; ++j) {
          if (unit_of(prog[j]) == u && !is_sync(prog[j])) {
            const Received* r = by_pc[base + 16 * uint32_t(j)];
            t = std::max(t, reads ? r->read : r->done);
            t_done = std::max(t_done, r->done);
          }
        }
        signal_ready[sc].push_back(t);
        signal_done[sc].push_back(t_done);
      } else if (opc == isa::OP_WAIT) {
        const uint32_t v = prog[i][1];
        std::vector<uint64_t> s = signal_ready[sc];
        std::sort(s.begin(), s.end());
        const uint64_t release = s[v - 1];  // the v-th SIGNAL's earliest count time
        std::vector<uint64_t> d = signal_done[sc];
        std::sort(d.begin(), d.end());
        for (size_t j = i + 1; j < prog.size(); ++j) {
          if (unit_of(prog[j]) == u && !is_sync(prog[j])) {
            const uint64_t taken = by_pc[base + 16 * uint32_t(j)]->taken;
            EXPECT_GT(taken, release)
                << "unit " << u << " ran past WAIT at pc 0x" << std::hex << base + 16 * i;
            if (taken <= d[v - 1]) ++early;
            break;
          }
        }
      }
    }
  }
  EXPECT_GT(early, 0) << "no WAIT on a reads-only SIGNAL ran before its unit had finished";
}

struct FaultCase {
  const char* name;
  Instr bad;
  uint32_t code, addr;
};

TEST_F(Seq, StaticFaultsStopWithCodePcAndAddress) {
  const std::vector<FaultCase> cases = {
      {"ICI send (reserved)", op(isa::OP_ICI_SEND), isa::FAULT_ILLEGAL_INSTRUCTION, 0},
      {"unknown opcode", op(0xEE), isa::FAULT_ILLEGAL_INSTRUCTION, 0},
      {"reserved bit in HALT", op(isa::OP_HALT | 1u << 20), isa::FAULT_ILLEGAL_INSTRUCTION, 0},
      {"WAIT on unit 3", wait_i(3, 0, 0), isa::FAULT_ILLEGAL_INSTRUCTION, 0},
      {"DMA.LOOP count 0", loop_i(0, 0, 4), isa::FAULT_ILLEGAL_INSTRUCTION, 0},
      {"MXU.MM 0 rows", mm_i(0, 8, 0, 0), isa::FAULT_ILLEGAL_INSTRUCTION, 0},
      {"VPU funct 33", vop_i(0x21, 1, 1, 1), isa::FAULT_ILLEGAL_INSTRUCTION, 0},
      {"seleqh imm bit 16", op(isa::OP_VPU_OP | isa::VF_SELEQH << 8 | 1u << 16, 1u << 16),
       isa::FAULT_ILLEGAL_INSTRUCTION, 0},
      {"max4 imm 16", op(isa::OP_VPU_OP | isa::VF_MAX4 << 8 | 1u << 16, 16),
       isa::FAULT_ILLEGAL_INSTRUCTION, 0},
      {"bfx imm bit 10", op(isa::OP_VPU_OP | isa::VF_BFX << 8 | 1u << 16, 1u << 10),
       isa::FAULT_ILLEGAL_INSTRUCTION, 0},
      {"shlor shift 32", op(isa::OP_VPU_OP | isa::VF_SHLOR << 8 | 1u << 16, 32),
       isa::FAULT_ILLEGAL_INSTRUCTION, 0},
      {"bfx with vb", op(isa::OP_VPU_OP | isa::VF_BFX << 8 | 1u << 24, 3),
       isa::FAULT_ILLEGAL_INSTRUCTION, 0},
      {"VPU unary with vb", vop_i(isa::VF_SQRT, 1, 2, 3), isa::FAULT_ILLEGAL_INSTRUCTION, 0},
      {"bcast lane N", op(isa::OP_VPU_OP | isa::VF_BCAST << 8, kN), isa::FAULT_ILLEGAL_INSTRUCTION,
       0},
      {"LDW misaligned", ldw_i(4, 8), isa::FAULT_UB_RANGE, 4},
      {"LDW beyond UB", ldw_i(kUbBytes - 16, 8), isa::FAULT_UB_RANGE, kUbBytes - 16},
      {"VPU.LD UB beyond", vld_i(0, 1, kUbBytes), isa::FAULT_UB_RANGE, kUbBytes},
      {"VPU.LD ACC row", vld_i(2, 1, kAccRows), isa::FAULT_ACC_RANGE, kAccRows},
      {"MM without a tile", mm_i(0, 8, 4, 0), isa::FAULT_MXU_NO_WEIGHTS, 0},
      {"second LDW before its MM", ldw_i(0, 8), isa::FAULT_MXU_TILES, 0},
      {"WAIT nothing can meet", wait_i(kVpu, 3, 1), isa::FAULT_SYNC_DEADLOCK, 0},
      {"SIGNAL from a second unit", signal_i(kMxu, 2), isa::FAULT_SYNC_DEADLOCK, 0},
  };
  uint32_t base = 0x2000;
  for (const auto& fc : cases) {
    SCOPED_TRACE(fc.name);
    for (auto& u : units_) u.got.clear();
    // some legal work first, then the bad instruction, then more work that must not run
    std::vector<Instr> prog = {copy_i(0, 64), vop_i(isa::VF_ADD, 1, 2, 3), fc.bad, copy_i(128, 256),
                               halt_i()};
    if (fc.code == isa::FAULT_MXU_TILES) prog[1] = ldw_i(64, 8);
    if (fc.name == std::string("SIGNAL from a second unit")) prog[1] = signal_i(kVpu, 2);
    load(base, prog);
    const Outcome o = run(base);
    EXPECT_EQ(o.status, int(isa::STATUS_FAULTED));
    EXPECT_EQ(o.code, fc.code);
    EXPECT_EQ(o.pc, base + 32);
    EXPECT_EQ(o.addr, fc.addr);
    EXPECT_EQ(o.fault_pulses, 1);
    // Queued work before the fault may be dropped (docs/isa.md); nothing from the faulting
    // instruction on reaches a unit.
    for (const auto& un : units_) {
      for (const auto& r : un.got) EXPECT_LT(r.pc, base + 32) << "ran past the fault";
    }
    if (fc.code == isa::FAULT_ILLEGAL_INSTRUCTION) EXPECT_EQ(o.info, fc.bad[0]);
    base += 0x200;
  }
  // MM range on ACC: acc_row + rows beyond ACC_ROWS
  load(0x8000, {ldw_i(0, 8), mm_i(0, 8, 8, kAccRows - 4), halt_i()});
  const Outcome o = run(0x8000);
  EXPECT_EQ(o.code, isa::FAULT_ACC_RANGE);
  EXPECT_EQ(o.addr, uint32_t(kAccRows));
  EXPECT_EQ(o.pc, 0x8010u);
  // and the chip runs the next program
  load(0x9000, {copy_i(0, 32), halt_i()});
  EXPECT_EQ(run(0x9000).status, int(isa::STATUS_HALTED));
}

// The sequencer's decode and the C++ ISA (sw/isa, which the assembler and the functional model
// use) agree on which instruction words are illegal: random words, biased towards real opcodes
// and small field values, each run as a one-instruction program.
TEST_F(Seq, DecodeAgreesWithTheCppIsaOnLegality) {
  const uint32_t opcodes[] = {isa::OP_NOP,     isa::OP_HALT,   isa::OP_FENCE,    isa::OP_IRQ,
                              isa::OP_WAIT,    isa::OP_SIGNAL, isa::OP_DMA_LOOP, isa::OP_DMA_COPY,
                              isa::OP_MXU_LDW, isa::OP_MXU_MM, isa::OP_VPU_LD,   isa::OP_VPU_ST,
                              isa::OP_VPU_OP,  isa::OP_VPU_LI, isa::OP_ICI_SEND, 0x7F,
                              isa::OP_REPEAT};
  auto field = [&](int bits) -> uint32_t {  // mostly small values, sometimes anything
    const uint32_t r = static_cast<uint32_t>(rng_());
    if (rng_() % 4 == 0) return bits >= 32 ? r : r & ((1u << bits) - 1);
    return static_cast<uint32_t>(rng_() % 3);
  };
  int illegal = 0, legal = 0;
  for (int i = 0; i < 6000; ++i) {
    Instr w{};
    w[0] = opcodes[rng_() % 17] | field(8) << 8 | field(8) << 16 | field(8) << 24;
    if (rng_() % 2) w[0] &= 0x0000FFFF;
    if (rng_() % 3 == 0) w[0] &= 0x000F03FF;  // the fields most opcodes use
    for (int k = 1; k < 4; ++k) w[k] = rng_() % 3 ? 0 : field(32);
    const isa::Decoded d = isa::decode({w[0], w[1], w[2], w[3]}, kN);
    const uint32_t base = 0x10000 + 0x40 * static_cast<uint32_t>(i);  // a later load overwrites
    std::vector<Instr> prog = {w};
    if (d.ok() && d.inst.op == isa::Opcode::kRepeat) {  // a body of NOPs: HALT may not be in it
      if (uint32_t(d.inst.count) * d.inst.len > 4000) continue;
      prog.insert(prog.end(), d.inst.len, op(isa::OP_NOP));
    }
    prog.push_back(halt_i());
    load(base, prog);
    const Outcome o = run(base);
    const bool rtl_illegal =
        o.status == int(isa::STATUS_FAULTED) && o.code == isa::FAULT_ILLEGAL_INSTRUCTION;
    ASSERT_EQ(rtl_illegal, !d.ok()) << std::hex << "words " << w[0] << " " << w[1] << " " << w[2]
                                    << " " << w[3] << ": C++ says '" << d.reason << "'";
    (rtl_illegal ? illegal : legal)++;
  }
  std::cout << legal << " legal and " << illegal << " illegal words agreed\n";
  EXPECT_GT(legal, 500);
  EXPECT_GT(illegal, 500);
}

// REPEAT (docs/isa.md, "Loops"): random programs of straight-line work and loops whose bodies
// hold unit work, stepped VPU.LDs, SIGNALs and WAITs with a step; every unit gets exactly the
// expansion (isa::expand_repeats): the body's instructions `count` times, with the body's PCs
// and the stepped field moved (w2 = 0), whatever the fetch timing and unit back-pressure.
TEST_F(Seq, RepeatHandsOutTheBodyCountTimesWithSteppedFields) {
  for (int trial = 0; trial < 40; ++trial) {
    for (auto& u : units_) u.got.clear();
    std::vector<Instr> prog;
    uint32_t signals = 0;  // to SC5, by the VPU
    while (prog.size() < 60) {
      if (rng_() % 3 != 0) {
        prog.push_back(rng_() % 2 ? copy_i(rng_() % 4096, rng_() % 4096)
                                  : vop_i(isa::VF_ADD, 1, 2, 3));
        continue;
      }
      const uint32_t len = 1 + rng_() % (rng_() % 4 == 0 ? isa::REPEAT_MAX_LEN : 6);
      const uint32_t count = 1 + rng_() % 40;
      prog.push_back(repeat_i(count, len));
      uint32_t sig_in_body = 0;
      for (uint32_t j = 0; j < len; ++j) {
        const int k = static_cast<int>(rng_() % 6);
        if (k == 0) {
          prog.push_back(signal_i(kVpu, 5));
          ++sig_in_body;
        } else if (k == 1 && signals + sig_in_body > 0) {
          // value v + i * s stays within the SIGNALs dispatched before it in every iteration
          const uint32_t v = 1 + rng_() % (signals + (sig_in_body > 0 ? 1 : 0));
          Instr w = wait_i(kDma, 5, std::min(v, signals + sig_in_body));
          w[2] = sig_in_body;  // step: the SIGNALs each iteration adds before it
          prog.push_back(w);
        } else if (k == 2) {
          prog.push_back(copy_i(rng_() % 4096, rng_() % 4096));
        } else if (k == 3) {
          prog.push_back(vop_i(isa::VF_MUL, 4, 5, 6));
        } else {
          // UB f32 rows of 4N bytes: addr + i * step stays inside the UB
          const int32_t step = static_cast<int32_t>(16 * (rng_() % 4)) * (rng_() % 2 ? 1 : -1);
          const uint32_t lo = step < 0 ? uint32_t(-step) * (count - 1) : 0;
          const uint32_t hi = kUbBytes - 16 - (step > 0 ? uint32_t(step) * (count - 1) : 0);
          if (lo > hi) {
            prog.push_back(vld_i(0, 7, 0));
          } else {
            prog.push_back(vld_i(0, 7, (lo + 16 * (rng_() % ((hi - lo) / 16 + 1))), step));
          }
        }
      }
      signals += sig_in_body * count;
    }
    prog.push_back(halt_i());
    const uint32_t base = 0x1000 + 16 * static_cast<uint32_t>(rng_() % 64);
    load(base, prog);
    const Outcome o = run(base, 400000);
    ASSERT_EQ(o.status, int(isa::STATUS_HALTED))
        << "trial " << trial << " code " << o.code << " pc 0x" << std::hex << o.pc;
    // expected: the expansion, with each executed instruction's PC; every executed instruction
    // retires once (a REPEAT once, its body count times, the HALT)
    std::array<std::vector<std::pair<uint32_t, Instr>>, 3> want;
    uint64_t executed = 0;
    for (size_t i = 0; i < prog.size(); ++i) {
      const auto add = [&](size_t k, uint32_t it) {
        const isa::Decoded d = isa::decode({prog[k][0], prog[k][1], prog[k][2], prog[k][3]}, kN);
        ASSERT_TRUE(d.ok()) << d.reason;
        const isa::Words e = isa::encode(isa::at_iteration(d.inst, it));
        const int u = unit_of(prog[k]);
        if (u >= 0 && !is_sync(prog[k]))
          want[u].push_back({base + 16 * uint32_t(k), {e[0], e[1], e[2], e[3]}});
      };
      if ((prog[i][0] & 0xFF) == isa::OP_REPEAT) {
        for (uint32_t it = 0; it < prog[i][1]; ++it) {
          for (uint32_t j = 1; j <= prog[i][2]; ++j) add(i + j, it);
        }
        executed += 1 + uint64_t(prog[i][1]) * prog[i][2];
        i += prog[i][2];
      } else {
        add(i, 0);
        ++executed;
      }
    }
    EXPECT_EQ(o.retired, executed) << "trial " << trial;
    for (int u = 0; u < 3; ++u) {
      ASSERT_EQ(units_[u].got.size(), want[u].size()) << "unit " << u << " trial " << trial;
      for (size_t i = 0; i < want[u].size(); ++i) {
        ASSERT_EQ(units_[u].got[i].pc, want[u][i].first) << "unit " << u << " #" << i;
        ASSERT_EQ(units_[u].got[i].ins, want[u][i].second) << "unit " << u << " #" << i;
      }
    }
  }
}

// REPEAT's faults: a HALT or a REPEAT in a body is illegal (at its PC); a body instruction
// faults at its PC with the address of the iteration that faults; a WAIT's stepped value is
// checked by the wait rule in every iteration.
TEST_F(Seq, RepeatFaultsNameThePcAndTheIterationsAddress) {
  struct Case {
    const char* name;
    std::vector<Instr> prog;
    uint32_t code, pc_index, addr;
  };
  const std::vector<Case> cases = {
      {"HALT in a body",
       {repeat_i(3, 2), vop_i(isa::VF_ADD, 1, 2, 3), halt_i(), halt_i()},
       isa::FAULT_ILLEGAL_INSTRUCTION,
       2,
       0},
      {"REPEAT in a body",
       {repeat_i(3, 2), repeat_i(2, 1), copy_i(0, 32), halt_i()},
       isa::FAULT_ILLEGAL_INSTRUCTION,
       1,
       0},
      {"len beyond the maximum",
       {op(isa::OP_REPEAT, 3, isa::REPEAT_MAX_LEN + 1), halt_i()},
       isa::FAULT_ILLEGAL_INSTRUCTION,
       0,
       0},
      // f32 rows of 16 bytes from 4096 - 64 step 16: iteration 4 is at 4096, beyond the UB
      {"stepped address leaves the UB",
       {repeat_i(10, 2), vop_i(isa::VF_ADD, 1, 2, 3), vld_i(0, 1, kUbBytes - 64, 16), halt_i()},
       isa::FAULT_UB_RANGE,
       2,
       kUbBytes},
      // one SIGNAL per iteration before the WAIT; value 1 step 2 outruns them at iteration 1
      {"stepped WAIT beyond the signals",
       {repeat_i(5, 2), signal_i(kDma, 1), op(isa::OP_WAIT | kVpu << 8 | 1 << 12, 1, 2), halt_i()},
       isa::FAULT_SYNC_DEADLOCK,
       2,
       0},
  };
  uint32_t base = 0x20000;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    load(base, c.prog);
    const Outcome o = run(base);
    EXPECT_EQ(o.status, int(isa::STATUS_FAULTED));
    EXPECT_EQ(o.code, c.code);
    EXPECT_EQ(o.pc, base + 16 * c.pc_index);
    EXPECT_EQ(o.addr, c.addr);
    base += 0x400;
  }
  // a legal loop after them runs
  load(base, {repeat_i(3, 1), copy_i(0, 32), halt_i()});
  EXPECT_EQ(run(base).status, int(isa::STATUS_HALTED));
}

// A program address that is not a multiple of 16 faults FETCH_RANGE at once, with that PC.
TEST_F(Seq, MisalignedProgramAddressFaults) {
  load(0x7000, {halt_i()});
  const Outcome o = run(0x7008);
  EXPECT_EQ(o.status, int(isa::STATUS_FAULTED));
  EXPECT_EQ(o.code, isa::FAULT_FETCH_RANGE);
  EXPECT_EQ(o.pc, 0x7008u);
  EXPECT_EQ(run(0x7000).status, int(isa::STATUS_HALTED));
}

TEST_F(Seq, FetchBeyondMemoryFaults) {
  limit_ = 0x3020;  // the burst at 0x3020 and later return an error
  load(0x3000, {vop_i(isa::VF_ADD, 1, 2, 3), vop_i(isa::VF_ADD, 1, 2, 3)});  // no HALT
  const Outcome o = run(0x3000);
  EXPECT_EQ(o.status, int(isa::STATUS_FAULTED));
  EXPECT_EQ(o.code, isa::FAULT_FETCH_RANGE);
  EXPECT_EQ(o.pc, 0x3020u);
  EXPECT_LE(units_[kVpu].got.size(), 2u);  // queued work may be dropped at the fault
}

// A unit's fault (here the DMA's, on its second copy) stops the program with that unit's code,
// PC and address; the later instructions are dropped and the units are told to abort.
TEST_F(Seq, UnitFaultStopsTheChip) {
  std::vector<Instr> prog;
  for (int i = 0; i < 20; ++i) prog.push_back(copy_i(32 * i, 4096 + 32 * i));
  prog.push_back(halt_i());
  load(0x4000, prog);
  units_[kDma].fault_on_pc = 0x4010;
  const Outcome o = run(0x4000);
  EXPECT_EQ(o.status, int(isa::STATUS_FAULTED));
  EXPECT_EQ(o.code, isa::FAULT_DMA);
  EXPECT_EQ(o.pc, 0x4010u);
  EXPECT_EQ(o.addr, 0xABCD00u);
  EXPECT_EQ(o.info, 2u);
  EXPECT_LT(units_[kDma].got.size(), 20u);
  units_[kDma].fault_on_pc = -1;
  load(0x5000, {copy_i(0, 32), halt_i()});
  EXPECT_EQ(run(0x5000).status, int(isa::STATUS_HALTED));
}

// HALT and FENCE wait for every unit: nothing after a FENCE is handed out before all earlier
// work has completed, and HALT reports done only after the last instruction completed.
TEST_F(Seq, FenceAndHaltWaitForAllWork) {
  for (auto& u : units_) u.got.clear();
  load(0x6000,
       {copy_i(0, 32), mm_i(0, 8, 1, 0), op(isa::OP_FENCE), vop_i(isa::VF_ADD, 1, 2, 3), halt_i()});
  // mm without ldw would fault: put a tile first
  load(0x6000, {ldw_i(0, 8), copy_i(0, 32), mm_i(0, 8, 1, 0), op(isa::OP_FENCE),
                vop_i(isa::VF_ADD, 1, 2, 3), halt_i()});
  const Outcome o = run(0x6000);
  ASSERT_EQ(o.status, int(isa::STATUS_HALTED));
  const uint64_t before = std::max(units_[kDma].got.back().done, units_[kMxu].got.back().done);
  EXPECT_GT(units_[kVpu].got.front().taken, before);
}

// FENCE and HALT also wait for the links' transmit queues to drain (tx_idle_i): a remote copy
// is finished for the DMA once its flits are queued, so the program's end — and anything after
// a FENCE — must wait for the link to have sent them (docs/multichip.md, "Transmit queues").
TEST_F(Seq, FenceAndHaltWaitForTheLinksTransmitQueues) {
  for (auto& u : units_) u.got.clear();
  load(0x6800, {op(isa::OP_FENCE), vop_i(isa::VF_ADD, 1, 2, 3), halt_i()});
  tx_busy_until_ = sim_.cycle() + 500;
  Outcome o = run(0x6800);
  ASSERT_EQ(o.status, int(isa::STATUS_HALTED));
  ASSERT_EQ(units_[kVpu].got.size(), 1u);
  EXPECT_GE(units_[kVpu].got.front().taken, tx_busy_until_) << "FENCE passed a busy link";
  // HALT alone: done no earlier than the queues drain
  load(0x6900, {halt_i()});
  tx_busy_until_ = sim_.cycle() + 300;
  o = run(0x6900);
  ASSERT_EQ(o.status, int(isa::STATUS_HALTED));
  EXPECT_GE(sim_.cycle(), tx_busy_until_) << "HALT completed with flits still queued";
  // idle queues cost nothing: the same program halts within a few cycles
  tx_busy_until_ = 0;
  o = run(0x6900);
  EXPECT_LT(o.cycles, 100u);
  // a fault is reported only once the queues are empty too (a faulted chip's flits must not
  // reach a neighbour after its next doorbell)
  load(0x6a00, {copy_i(0, 32), copy_i(32, 64), halt_i()});
  units_[kDma].fault_on_pc = 0x6a00;
  tx_busy_until_ = sim_.cycle() + 400;
  o = run(0x6a00);
  units_[kDma].fault_on_pc = -1;
  EXPECT_EQ(o.status, int(isa::STATUS_FAULTED));
  EXPECT_EQ(o.pc, 0x6a00u);
  EXPECT_GE(sim_.cycle(), tx_busy_until_) << "FAULTED reported with flits still queued";
}

}  // namespace
}  // namespace tessera
