// The Tessera assembler and disassembler (docs/isa.md, "Assembly syntax").
#include "sw/asm/assembler.h"

#include <cctype>
#include <cstdio>
#include <functional>

namespace tessera::assembler {
namespace detail {

std::string lower(std::string_view text) {
  std::string s(text);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::optional<int64_t> parse_integer(std::string_view t) {
  bool neg = false;
  if (!t.empty() && t[0] == '-') {
    neg = true;
    t.remove_prefix(1);
  }
  int base = 10;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    base = 16;
    t.remove_prefix(2);
  }
  if (t.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : t) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (base == 16 && std::isxdigit(static_cast<unsigned char>(c))) {
      d = std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
    } else {
      return std::nullopt;
    }
    if (v > (0x7FFFFFFFFFFFFFFFull - d) / base) return std::nullopt;
    v = v * base + d;
  }
  return neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
}

}  // namespace detail

namespace {

using detail::lower;
using isa::Instruction;
using isa::Opcode;

struct Token {
  std::string text;  // trimmed
  int column = 0;    // 1-based
};

// Parses the operands of one line; each parser records an error at the operand's column.
class LineParser {
 public:
  LineParser(int line, std::vector<AsmError>& errors) : line_(line), errors_(errors) {}

  void error(int column, std::string reason) {
    if (errors_.size() < kMaxAsmErrors) errors_.push_back({line_, column, std::move(reason)});
    failed_ = true;
  }
  bool failed() const { return failed_; }

  // A name from a fixed list (case-insensitive); returns its index.
  int name(const Token& t, const std::vector<const char*>& names, const std::string& what) {
    const std::string l = lower(t.text);
    for (size_t i = 0; i < names.size(); ++i) {
      if (l == names[i]) return static_cast<int>(i);
    }
    std::string list;
    for (const char* n : names) list += (list.empty() ? "" : "|") + std::string(n);
    error(t.column, "expected " + what + " " + list + ", got '" + t.text + "'");
    return 0;
  }

  // "v3", "sc12": a prefix and a number 0..15.
  uint8_t reg(const Token& t, const char* prefix, const std::string& what) {
    const std::string l = lower(t.text);
    const std::string p = prefix;
    if (l.size() > p.size() && l.compare(0, p.size(), p) == 0) {
      const std::string digits = l.substr(p.size());
      bool all_digits = digits.size() <= 2;
      for (char c : digits) all_digits = all_digits && std::isdigit(static_cast<unsigned char>(c));
      if (all_digits && !(digits.size() == 2 && digits[0] == '0')) {
        const int v = std::stoi(digits);
        if (v <= 15) return static_cast<uint8_t>(v);
      }
    }
    error(t.column, "expected " + what + " " + p + "0.." + p + "15, got '" + t.text + "'");
    return 0;
  }

  // An integer in [lo, hi].
  int64_t number(const Token& t, int64_t lo, int64_t hi, const std::string& what) {
    const auto v = detail::parse_integer(t.text);
    if (!v) {
      error(t.column, "expected a number (" + what + "), got '" + t.text + "'");
      return 0;
    }
    if (*v < lo || *v > hi) {
      error(t.column, what + " must be in " + std::to_string(lo) + ".." + std::to_string(hi) +
                          ", got '" + t.text + "'");
      return 0;
    }
    return *v;
  }
  uint32_t u32(const Token& t, const std::string& what) {
    return static_cast<uint32_t>(number(t, 0, 0xFFFFFFFFll, what));
  }
  // A signed 32-bit field: -2^31 .. 2^31-1, or any 32-bit pattern written as a positive number.
  int32_t s32(const Token& t, const std::string& what) {
    return static_cast<int32_t>(
        static_cast<uint32_t>(number(t, -0x80000000ll, 0xFFFFFFFFll, what)));
  }

 private:
  int line_;
  std::vector<AsmError>& errors_;
  bool failed_ = false;
};

const std::vector<const char*> kUnits = {"dma", "mxu", "vpu"};
const std::vector<const char*> kSpaces = {"hbm", "ub"};
const std::vector<const char*> kKinds = {"f32", "bf16", "acc"};
const std::vector<const char*> kWalks = {"src", "dst"};
const std::vector<const char*> kAccModes = {"set", "acc"};
const std::vector<const char*> kTranspose = {"t"};
const std::vector<const char*> kLinks = {"local", "next", "prev"};

// "sc3" (a local counter) or "rc3" (a remote counter: WAIT on it, a neighbour's SIGNAL to it).
uint8_t counter(LineParser& p, const Token& t, bool& remote) {
  remote = t.text.size() > 2 && (t.text[0] == 'r' || t.text[0] == 'R');
  return p.reg(t, remote ? "rc" : "sc", "a sync counter");
}

std::vector<const char*> funct_names() {
  std::vector<const char*> v;
  for (uint32_t f = 0; f < isa::VF_COUNT; ++f)
    v.push_back(isa::funct_name(static_cast<isa::Funct>(f)));
  return v;
}

struct MnemonicSpec {
  const char* name;
  Opcode op;
  size_t min_operands, max_operands;
  const char* operands;  // for messages
};

const std::vector<MnemonicSpec>& mnemonics() {
  static const std::vector<MnemonicSpec> k = {
      {"nop", Opcode::kNop, 0, 0, ""},
      {"halt", Opcode::kHalt, 0, 0, ""},
      {"fence", Opcode::kFence, 0, 0, ""},
      {"irq", Opcode::kIrq, 1, 1, "code"},
      {"repeat", Opcode::kRepeat, 2, 2, "count, len"},
      {"wait", Opcode::kWait, 3, 4, "unit, sc|rc, value [, step]"},
      {"signal", Opcode::kSignal, 2, 3, "unit, sc [, reads] | dma, rc, next|prev"},
      {"dma.loop", Opcode::kDmaLoop, 6, 6, "walk, pair, c0, s0, c1, s1"},
      {"dma.copy", Opcode::kDmaCopy, 5, 6, "src_space, dst_space, e, src, dst [, next|prev]"},
      {"mxu.ldw", Opcode::kMxuLdw, 2, 3, "addr, stride [, t]"},
      {"mxu.mm", Opcode::kMxuMm, 5, 6, "acc_mode, addr, stride, rows, acc_row [, acc_stride]"},
      {"vpu.ld", Opcode::kVpuLd, 3, 4, "kind, vd, addr [, step]"},
      {"vpu.st", Opcode::kVpuSt, 3, 4, "kind, vs, addr [, step]"},
      {"vpu.op", Opcode::kVpuOp, 5, 6, "funct, vd, va, vb, vc [, imm]"},
      {"vpu.li", Opcode::kVpuLi, 2, 3, "vd, imm [, step]"},
  };
  return k;
}

// Splits "a, b ,c" (the text after the mnemonic, starting at column `col0`) into trimmed
// tokens with their columns. An empty operand is an error.
std::vector<Token> split_operands(const std::string& s, int col0, LineParser& p) {
  std::vector<Token> out;
  size_t i = 0;
  bool any = s.find_first_not_of(" \t\r") != std::string::npos;
  if (!any) return out;
  while (true) {
    const size_t end = s.find(',', i);
    const std::string field = s.substr(i, end == std::string::npos ? std::string::npos : end - i);
    const size_t b = field.find_first_not_of(" \t\r");
    if (b == std::string::npos) {
      p.error(col0 + static_cast<int>(i), "empty operand");
      out.push_back({"", col0 + static_cast<int>(i)});
    } else {
      const size_t e = field.find_last_not_of(" \t\r");
      out.push_back({field.substr(b, e - b + 1), col0 + static_cast<int>(i + b)});
    }
    if (end == std::string::npos) break;
    i = end + 1;
  }
  return out;
}

void assemble_line(const std::string& raw, int line_no, const AsmOptions& opt,
                   std::vector<AsmError>& errors, std::vector<Instruction>& out) {
  std::string line = raw;
  const size_t hash = line.find('#');
  if (hash != std::string::npos) line.resize(hash);
  const size_t m0 = line.find_first_not_of(" \t\r");
  if (m0 == std::string::npos) return;
  size_t m1 = line.find_first_of(" \t\r", m0);
  if (m1 == std::string::npos) m1 = line.size();
  const std::string mn = lower(line.substr(m0, m1 - m0));
  const int mcol = static_cast<int>(m0) + 1;
  LineParser p(line_no, errors);

  const MnemonicSpec* spec = nullptr;
  for (const auto& s : mnemonics()) {
    if (mn == s.name) spec = &s;
  }
  if (!spec) {
    if (mn == "ici.send" || mn == "ici.recv") {
      p.error(mcol, "'" + line.substr(m0, m1 - m0) +
                        "' is reserved for the multi-chip work (an illegal instruction)");
    } else {
      p.error(mcol, "unknown mnemonic '" + line.substr(m0, m1 - m0) + "'");
    }
    return;
  }
  const std::vector<Token> ops = split_operands(line.substr(m1), static_cast<int>(m1) + 1, p);
  if (p.failed()) return;
  if (ops.size() < spec->min_operands) {
    p.error(mcol, std::string(spec->name) + " expects " +
                      (spec->min_operands == spec->max_operands
                           ? std::to_string(spec->min_operands)
                           : std::to_string(spec->min_operands) + " or " +
                                 std::to_string(spec->max_operands)) +
                      " operands (" + spec->operands + "), got " + std::to_string(ops.size()));
    return;
  }
  if (ops.size() > spec->max_operands) {
    p.error(ops[spec->max_operands].column, std::string(spec->name) + " takes " +
                                                std::to_string(spec->max_operands) + " operands (" +
                                                spec->operands + "), extra operand '" +
                                                ops[spec->max_operands].text + "'");
    return;
  }

  Instruction i;
  i.op = spec->op;
  switch (spec->op) {
    case Opcode::kNop:
    case Opcode::kHalt:
    case Opcode::kFence:
      break;
    case Opcode::kIrq:
      i.code = p.u32(ops[0], "code");
      break;
    case Opcode::kRepeat:
      i.count = static_cast<uint16_t>(p.number(ops[0], 1, 65535, "count"));
      i.len = static_cast<uint8_t>(p.number(ops[1], 1, isa::REPEAT_MAX_LEN, "len"));
      break;
    case Opcode::kWait:
      i.value = p.u32(ops[2], "value");
      if (ops.size() == 4) i.step = p.s32(ops[3], "step");
      i.unit = static_cast<isa::Unit>(p.name(ops[0], kUnits, "a unit"));
      i.sc = counter(p, ops[1], i.remote);
      break;
    case Opcode::kSignal: {
      i.unit = static_cast<isa::Unit>(p.name(ops[0], kUnits, "a unit"));
      bool remote = false;
      i.sc = counter(p, ops[1], remote);
      if (ops.size() == 3) {
        if (!remote && lower(ops[2].text) == "reads")
          i.reads = true;
        else
          i.link = static_cast<isa::Link>(p.name(ops[2], kLinks, "a link"));
      }
      if (p.failed()) break;
      // A local SIGNAL counts scN here; a remote one counts rcN on the neighbour over `link`.
      if (remote != (i.link != isa::Link::kLocal)) {
        p.error(ops[1].column, remote ? "signal to a remote counter rcN needs a link: next|prev"
                                      : "signal over a link counts the neighbour's rcN, not scN");
      } else if (remote && i.unit != isa::Unit::kDma) {
        p.error(ops[0].column, "only the dma signals a neighbour's counter");
      }
      break;
    }
    case Opcode::kDmaLoop:
      i.walk = static_cast<isa::Walk>(p.name(ops[0], kWalks, "a walk"));
      i.pair = static_cast<uint8_t>(p.number(ops[1], 0, 1, "pair"));
      i.c0 = static_cast<uint16_t>(p.number(ops[2], 1, 65535, "count c0"));
      i.s0 = p.s32(ops[3], "stride s0");
      i.c1 = static_cast<uint16_t>(p.number(ops[4], 1, 65535, "count c1"));
      i.s1 = p.s32(ops[5], "stride s1");
      break;
    case Opcode::kDmaCopy:
      i.src_space = static_cast<isa::Space>(p.name(ops[0], kSpaces, "a space"));
      i.dst_space = static_cast<isa::Space>(p.name(ops[1], kSpaces, "a space"));
      i.elem_bytes = static_cast<uint8_t>(p.number(ops[2], 0, 15, "element bytes e"));
      i.src = p.u32(ops[3], "src");
      i.dst = p.u32(ops[4], "dst");
      if (ops.size() == 6) i.link = static_cast<isa::Link>(p.name(ops[5], kLinks, "a link"));
      break;
    case Opcode::kMxuLdw:
      i.addr = p.u32(ops[0], "addr");
      i.stride = p.s32(ops[1], "stride");
      if (ops.size() == 3) i.transpose = p.name(ops[2], kTranspose, "a transpose flag") == 0;
      break;
    case Opcode::kMxuMm:
      i.acc_mode = static_cast<isa::AccMode>(p.name(ops[0], kAccModes, "an acc_mode"));
      i.addr = p.u32(ops[1], "addr");
      i.stride = p.s32(ops[2], "stride");
      i.rows = static_cast<uint16_t>(p.number(ops[3], 1, 65535, "rows"));
      i.acc_row = static_cast<uint16_t>(p.number(ops[4], 0, 65535, "acc_row"));
      if (ops.size() == 6)
        i.acc_stride = static_cast<uint16_t>(p.number(ops[5], 1, 256, "acc_stride"));
      break;
    case Opcode::kVpuLd:
    case Opcode::kVpuSt: {
      i.kind = static_cast<isa::Kind>(p.name(ops[0], kKinds, "a kind"));
      const uint8_t r = p.reg(ops[1], "v", "a vector register");
      (spec->op == Opcode::kVpuLd ? i.vd : i.vs) = r;
      i.addr = p.u32(ops[2], i.kind == isa::Kind::kAcc ? "ACC row" : "addr");
      if (ops.size() == 4) i.step = p.s32(ops[3], "step");
      break;
    }
    case Opcode::kVpuOp: {
      static const std::vector<const char*> kFuncts = funct_names();
      i.funct = static_cast<isa::Funct>(p.name(ops[0], kFuncts, "a funct"));
      const bool known = !p.failed();
      i.vd = p.reg(ops[1], "v", "a vector register");
      i.va = p.reg(ops[2], "v", "a vector register");
      i.vb = p.reg(ops[3], "v", "a vector register");
      i.vc = p.reg(ops[4], "v", "a vector register");
      if (ops.size() == 6) i.imm = p.u32(ops[5], "imm");
      if (known) {
        const isa::FunctOperands u = isa::funct_operands(i.funct);
        const std::string fn = isa::funct_name(i.funct);
        if (!u.va && i.va) p.error(ops[2].column, "vpu.op " + fn + " does not use va: write v0");
        if (!u.vb && i.vb) p.error(ops[3].column, "vpu.op " + fn + " does not use vb: write v0");
        if (!u.vc && i.vc) p.error(ops[4].column, "vpu.op " + fn + " does not use vc: write v0");
        if (!u.imm && i.imm) {
          p.error(ops[5].column, "vpu.op " + fn + " does not use imm: omit it or write 0");
        }
        if (i.funct == isa::Funct::kBcast && ops.size() == 6 && i.imm >= opt.n) {
          p.error(ops[5].column, "bcast lane must be below N = " + std::to_string(opt.n) +
                                     ", got '" + ops[5].text + "'");
        }
        if (const std::string why = isa::funct_imm_problem(i.funct, i.imm);
            ops.size() == 6 && !why.empty()) {
          p.error(ops[5].column, why);
        }
      }
      break;
    }
    case Opcode::kVpuLi:
      i.vd = p.reg(ops[0], "v", "a vector register");
      i.imm = static_cast<uint32_t>(p.s32(ops[1], "imm"));
      if (ops.size() == 3) i.step = p.s32(ops[2], "step");
      break;
  }
  if (p.failed()) return;
  // Every check above mirrors decode's; a legal line always decodes to itself.
  const isa::Decoded d = isa::decode(isa::encode(i), opt.n);
  if (!d.ok() || d.inst != i) {
    p.error(mcol, d.ok() ? "internal: the instruction does not round-trip" : d.reason);
    return;
  }
  out.push_back(i);
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", v);
  return buf;
}

}  // namespace

std::vector<uint32_t> AsmResult::words() const {
  std::vector<uint32_t> w;
  for (const auto& i : instructions) {
    const isa::Words e = isa::encode(i);
    w.insert(w.end(), e.begin(), e.end());
  }
  return w;
}

std::vector<uint8_t> AsmResult::bytes() const {
  std::vector<uint8_t> b;
  for (uint32_t w : words()) {
    for (int k = 0; k < 4; ++k) b.push_back(static_cast<uint8_t>(w >> (8 * k)));
  }
  return b;
}

AsmResult assemble(std::string_view text, const AsmOptions& options) {
  AsmResult r;
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    ++line_no;
    assemble_line(std::string(text.substr(pos, end - pos)), line_no, options, r.errors,
                  r.instructions);
    if (r.errors.size() >= kMaxAsmErrors) break;
    pos = end + 1;
  }
  if (!r.errors.empty()) r.instructions.clear();
  return r;
}

std::string format_error(const std::string& file, const AsmError& e) {
  return file + ":" + std::to_string(e.line) + ":" + std::to_string(e.column) + ": " + e.reason;
}

std::string disassemble(const Instruction& i) {
  const std::string m = isa::opcode_mnemonic(i.op);
  const auto reg = [](uint8_t r) { return "v" + std::to_string(r); };
  const auto dec = [](int64_t v) { return std::to_string(v); };
  // The per-iteration step of a stepped field: printed when not 0.
  const std::string step = i.step != 0 ? ", " + dec(i.step) : std::string();
  switch (i.op) {
    case Opcode::kNop:
    case Opcode::kHalt:
    case Opcode::kFence:
      return m;
    case Opcode::kIrq:
      return m + " " + dec(i.code);
    case Opcode::kRepeat:
      return m + " " + dec(i.count) + ", " + dec(i.len);
    case Opcode::kWait:
      return m + " " + kUnits[static_cast<int>(i.unit)] + (i.remote ? ", rc" : ", sc") + dec(i.sc) +
             ", " + dec(i.value) + step;
    case Opcode::kSignal:
      if (i.link != isa::Link::kLocal) {
        return m + " " + kUnits[static_cast<int>(i.unit)] + ", rc" + dec(i.sc) + ", " +
               kLinks[static_cast<int>(i.link)];
      }
      return m + " " + kUnits[static_cast<int>(i.unit)] + ", sc" + dec(i.sc) +
             (i.reads ? ", reads" : "");
    case Opcode::kDmaLoop:
      return m + " " + kWalks[static_cast<int>(i.walk)] + ", " + dec(i.pair) + ", " + dec(i.c0) +
             ", " + dec(i.s0) + ", " + dec(i.c1) + ", " + dec(i.s1);
    case Opcode::kDmaCopy:
      return m + " " + kSpaces[static_cast<int>(i.src_space)] + ", " +
             kSpaces[static_cast<int>(i.dst_space)] + ", " + dec(i.elem_bytes) + ", " + hex(i.src) +
             ", " + hex(i.dst) +
             (i.link != isa::Link::kLocal ? ", " + std::string(kLinks[static_cast<int>(i.link)])
                                          : std::string());
    case Opcode::kMxuLdw:
      return m + " " + hex(i.addr) + ", " + dec(i.stride) + (i.transpose ? ", t" : "");
    case Opcode::kMxuMm:
      return m + " " + kAccModes[static_cast<int>(i.acc_mode)] + ", " + hex(i.addr) + ", " +
             dec(i.stride) + ", " + dec(i.rows) + ", " + dec(i.acc_row) +
             (i.acc_stride != 1 ? ", " + dec(i.acc_stride) : std::string());
    case Opcode::kVpuLd:
    case Opcode::kVpuSt:
      return m + " " + kKinds[static_cast<int>(i.kind)] + ", " +
             reg(i.op == Opcode::kVpuLd ? i.vd : i.vs) + ", " +
             (i.kind == isa::Kind::kAcc ? dec(i.addr) : hex(i.addr)) + step;
    case Opcode::kVpuOp: {
      std::string s = m + " " + isa::funct_name(i.funct) + ", " + reg(i.vd) + ", " + reg(i.va) +
                      ", " + reg(i.vb) + ", " + reg(i.vc);
      if (isa::funct_operands(i.funct).imm) s += ", " + dec(i.imm);
      return s;
    }
    case Opcode::kVpuLi: {
      char buf[16];
      std::snprintf(buf, sizeof buf, "0x%08x", i.imm);
      return m + " " + reg(i.vd) + ", " + buf + step;
    }
  }
  return m;
}

DisasmResult disassemble(const std::vector<uint8_t>& bytes, const AsmOptions& options) {
  DisasmResult r;
  if (bytes.size() % isa::kInstructionBytes != 0) {
    r.errors.push_back("size " + std::to_string(bytes.size()) +
                       " bytes is not a multiple of 16 (one instruction is 16 bytes)");
    return r;
  }
  for (size_t off = 0; off < bytes.size(); off += isa::kInstructionBytes) {
    isa::Words w;
    for (int k = 0; k < 4; ++k) {
      w[k] = 0;
      for (int b = 0; b < 4; ++b) w[k] |= static_cast<uint32_t>(bytes[off + 4 * k + b]) << (8 * b);
    }
    const isa::Decoded d = isa::decode(w, options.n);
    if (!d.ok()) {
      if (r.errors.size() < kMaxAsmErrors) {
        r.errors.push_back("offset " + hex(static_cast<uint32_t>(off)) + ": " + d.reason);
      }
      continue;
    }
    r.text += disassemble(d.inst) + "\n";
  }
  if (!r.errors.empty()) r.text.clear();
  return r;
}

}  // namespace tessera::assembler
