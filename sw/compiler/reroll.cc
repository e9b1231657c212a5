// Loop compression (reroll.h).
#include "sw/compiler/reroll.h"

#include <algorithm>

namespace tessera::compiler {
namespace {

using isa::Instruction;
using isa::Opcode;

// Whether `b` is `a` as iteration `t` (>= 1) of a body executes it. For a stepped opcode the
// step is fixed by iteration 1 (`*step` is set there) and checked at the others.
bool same_at(const Instruction& a, const Instruction& b, uint32_t t, uint32_t* step) {
  if (a.op != b.op) return false;
  const uint32_t* fa = isa::stepped_field(a);
  if (fa == nullptr) return a == b;
  if (a.step != 0 || b.step != 0) return false;
  Instruction c = b;
  *isa::stepped_field(c) = *fa;
  if (!(c == a)) return false;
  const uint32_t diff = *isa::stepped_field(b) - *fa;
  if (t == 1) {
    *step = diff;
    return true;
  }
  return diff == t * *step;
}

}  // namespace

std::vector<Instruction> reroll(const std::vector<Instruction>& p, std::vector<uint64_t>* marks,
                                RerollStats* stats) {
  const size_t n = p.size();
  constexpr uint32_t kMaxLen = isa::REPEAT_MAX_LEN;
  constexpr uint32_t kMaxCount = 65535;
  std::vector<Instruction> out;
  out.reserve(n / 2);
  std::vector<uint64_t> new_marks;
  size_t m = 0;  // next mark
  uint64_t loops = 0;
  std::vector<uint32_t> steps(kMaxLen), best_steps(kMaxLen);
  size_t i = 0;
  while (i < n) {
    // marks at i map to the next output index
    while (marks != nullptr && m < marks->size() && (*marks)[m] <= i) {
      new_marks.push_back(out.size());
      ++m;
    }
    if (p[i].op == Opcode::kRepeat) {  // an existing loop: kept as it is
      const size_t end = std::min(n, i + 1 + p[i].len);
      out.insert(out.end(), p.begin() + static_cast<std::ptrdiff_t>(i),
                 p.begin() + static_cast<std::ptrdiff_t>(end));
      i = end;
      continue;
    }
    // A loop covers [i, limit): not past the next mark, REPEAT or HALT.
    size_t limit = marks != nullptr && m < marks->size() ? std::min<uint64_t>(n, (*marks)[m]) : n;
    for (size_t j = i; j < limit && j < i + 2 * kMaxLen; ++j) {  // the first two iterations
      if (p[j].op == Opcode::kRepeat || p[j].op == Opcode::kHalt) {
        limit = j;
        break;
      }
    }
    uint64_t best_saved = 0;
    uint32_t best_len = 0, best_count = 0;
    for (uint32_t len = 1; len <= kMaxLen && i + 2 * len <= limit; ++len) {
      bool ok = true;
      for (uint32_t j = 0; j < len && ok; ++j) ok = same_at(p[i + j], p[i + len + j], 1, &steps[j]);
      if (!ok) continue;
      uint32_t count = 2;
      while (count < kMaxCount && i + (count + 1) * len <= n) {
        const size_t base = i + count * len;
        bool more = true;
        for (uint32_t j = 0; j < len && more; ++j) {
          const Opcode op = p[base + j].op;
          more = op != Opcode::kRepeat && op != Opcode::kHalt &&
                 !(marks != nullptr && m < marks->size() && base + j >= (*marks)[m]) &&
                 same_at(p[i + j], p[base + j], count, &steps[j]);
        }
        if (!more) break;
        ++count;
      }
      const uint64_t saved = uint64_t(len) * (count - 1) - 1;  // the REPEAT costs one
      if (saved > best_saved) {
        best_saved = saved;
        best_len = len;
        best_count = count;
        std::copy(steps.begin(), steps.begin() + len, best_steps.begin());
      }
    }
    if (best_saved == 0) {
      out.push_back(p[i]);
      ++i;
      continue;
    }
    Instruction r;
    r.op = Opcode::kRepeat;
    r.count = static_cast<uint16_t>(best_count);
    r.len = static_cast<uint8_t>(best_len);
    out.push_back(r);
    for (uint32_t j = 0; j < best_len; ++j) {
      Instruction b = p[i + j];
      if (isa::is_stepped(b.op)) b.step = static_cast<int32_t>(best_steps[j]);
      out.push_back(b);
    }
    ++loops;
    i += size_t(best_len) * best_count;
  }
  while (marks != nullptr && m < marks->size()) {
    new_marks.push_back(out.size());
    ++m;
  }
  if (marks != nullptr) *marks = std::move(new_marks);
  if (stats != nullptr) *stats = {n, out.size(), loops};
  return out;
}

}  // namespace tessera::compiler
