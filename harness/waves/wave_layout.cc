#include "harness/waves/wave_layout.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "gtkwave/fstapi.h"

namespace tessera::waves {
namespace {

struct FstFile {
  explicit FstFile(const std::string& path) : ctx(fstReaderOpen(path.c_str())) {
    if (!ctx) throw std::runtime_error(path + ": not a readable FST waveform");
  }
  ~FstFile() { fstReaderClose(ctx); }
  FstFile(const FstFile&) = delete;
  FstFile& operator=(const FstFile&) = delete;
  void* ctx;
};

// "TOP.a.g[0].sig[7:0]" -> "TOP.a.g[0].sig", "TOP.a.mem[3][13:0]" -> "TOP.a.mem[3]": a trailing
// bit range, if any
std::string base_name(const std::string& s) {
  const size_t b = s.rfind('[');
  if (b == std::string::npos || s.back() != ']' || s.find(':', b) == std::string::npos) return s;
  return s.substr(0, b);
}

// Walks the hierarchy: fn(full name without range, range, handle).
template <class Fn>
void walk(void* ctx, Fn fn) {
  std::vector<std::string> scope;
  fstReaderIterateHierRewind(ctx);
  while (const fstHier* h = fstReaderIterateHier(ctx)) {
    if (h->htyp == FST_HT_SCOPE) {
      scope.emplace_back(h->u.scope.name);
    } else if (h->htyp == FST_HT_UPSCOPE) {
      if (!scope.empty()) scope.pop_back();
    } else if (h->htyp == FST_HT_VAR) {
      std::string name(h->u.var.name, h->u.var.name_length), range;
      const size_t sp = name.find(' ');
      if (sp != std::string::npos) {  // Verilator declares "sig [63:0]"
        range = name.substr(sp + 1);
        name = name.substr(0, sp);
      }
      std::string full;
      for (const std::string& s : scope) full += s + ".";
      fn(full + name, range, h->u.var.handle);
    }
  }
}

constexpr int kHierarchyPane = 300;  // GTKWave's tree pane and borders, in pixels

// GTKWave's trace colours (1 red, 2 orange, 3 yellow, 4 green, 5 blue, 6 indigo, 7 violet),
// one per part of the chip so a unit's traces read as a block.
struct Colour {
  const char* part;
  int index;
};
constexpr Colour kColours[] = {{"none", 0}, {"seq", 3}, {"dma", 1}, {"mxu", 2},
                               {"vpu", 7},  {"ub", 6},  {"hbm", 4}, {"ici", 5}};

const char* kModes[] = {"bf16", "fp32", "insn", "hbmcmd", "u32"};

}  // namespace

FstInfo read_fst(const std::string& path) {
  FstFile f(path);
  FstInfo info;
  info.start = fstReaderGetStartTime(f.ctx);
  info.end = fstReaderGetEndTime(f.ctx);
  walk(f.ctx, [&](const std::string& name, const std::string& range, fstHandle) {
    info.signals.emplace(name, range);
  });
  return info;
}

uint64_t first_nonzero(const std::string& path, const std::string& signal, uint64_t from) {
  FstFile f(path);
  fstHandle handle = 0;
  walk(f.ctx, [&](const std::string& name, const std::string&, fstHandle h) {
    if (name == base_name(signal) && !handle) handle = h;
  });
  if (!handle) return UINT64_MAX;
  struct Find {
    uint64_t from, at = UINT64_MAX;
  } find{from};
  fstReaderClrFacProcessMaskAll(f.ctx);
  fstReaderSetFacProcessMask(f.ctx, handle);
  fstReaderIterBlocks2(
      f.ctx,
      [](void* user, uint64_t time, fstHandle, const unsigned char* value) {
        auto* fd = static_cast<Find*>(user);
        if (time < fd->from || fd->at != UINT64_MAX) return;
        for (const unsigned char* c = value; *c; ++c)
          if (*c == '1') {
            fd->at = time;
            return;
          }
      },
      [](void* user, uint64_t time, fstHandle, const unsigned char* value, uint32_t len) {
        auto* fd = static_cast<Find*>(user);
        if (time < fd->from || fd->at != UINT64_MAX) return;
        for (uint32_t i = 0; i < len; ++i)
          if (value[i] == '1') {
            fd->at = time;
            return;
          }
      },
      &find, nullptr);
  return find.at;
}

LayoutResult write_layout(const std::string& fst, const std::string& layout, const std::string& out,
                          const std::string& filter_dir) {
  const FstInfo info = read_fst(fst);
  std::ifstream in(layout);
  if (!in) throw std::runtime_error(layout + ": cannot read the layout");
  LayoutResult res;
  res.start = info.start;
  res.end = info.end;
  std::ostringstream body;
  std::string line, marker_signal, flags = "@28";
  int width = 1800, signals_width = 300;
  bool filtered = false;
  int colour = 0;
  const auto flag_line = [&]() {
    unsigned long f = std::stoul(flags.substr(1), nullptr, 16);
    f = filtered ? (f | 0x4000ul) : (f & ~0x4000ul);
    char buf[32];
    std::snprintf(buf, sizeof buf, "@%lx", f);
    return std::string(buf);
  };
  while (std::getline(in, line)) {
    if (line.rfind("[*] filter:", 0) == 0) {
      std::string mode = line.substr(11);
      mode.erase(0, mode.find_first_not_of(' '));
      int k = 0;
      for (int i = 0; i < 5; ++i)
        if (mode == kModes[i]) k = i + 1;
      if (!k && mode != "none")
        throw std::runtime_error(layout + ": unknown filter '" + mode + "'");
      filtered = k != 0;
      body << (k ? "^>" + std::to_string(k) + " " + filter_dir + "/tessera-wave-" + mode : "^>0")
           << "\n"
           << flag_line() << "\n";
      continue;
    }
    if (line.rfind("[*] colour:", 0) == 0) {
      std::string part = line.substr(11);
      part.erase(0, part.find_first_not_of(' '));
      colour = -1;
      for (const Colour& c : kColours)
        if (part == c.part) colour = c.index;
      if (colour < 0) throw std::runtime_error(layout + ": unknown colour '" + part + "'");
      continue;
    }
    if (line.rfind("[*] marker:", 0) == 0) {
      marker_signal = line.substr(11);
      marker_signal.erase(0, marker_signal.find_first_not_of(' '));
      continue;
    }
    if (line.rfind("[timestart]", 0) == 0 || line.rfind("[dumpfile]", 0) == 0 ||
        line.rfind("*", 0) == 0)
      continue;  // written below for this dump
    if (line.rfind("[size]", 0) == 0) std::sscanf(line.c_str(), "[size] %d", &width);
    if (line.rfind("[signals_width]", 0) == 0)
      std::sscanf(line.c_str(), "[signals_width] %d", &signals_width);
    if (line.rfind("@", 0) == 0) {
      flags = line;
      body << flag_line() << "\n";
      continue;
    }
    if (!line.empty() && (std::isalpha(static_cast<unsigned char>(line[0])) || line[0] == '_')) {
      const std::string base = base_name(line);
      if (colour) body << "[color] " << colour << "\n";
      const auto it = info.signals.find(base);
      if (it == info.signals.end()) {
        res.missing.push_back(base);
        body << line << "\n";
      } else {
        body << base << it->second << "\n";
      }
      continue;
    }
    body << line << "\n";
  }
  // The view: the whole dump across the wave area. GTKWave shows 2^-zoom time units in a frame
  // of 200 pixels; the wave area is the window less the signal names and the hierarchy pane.
  const double span = static_cast<double>(info.end > info.start ? info.end - info.start : 1);
  const double pixels = std::max(200, width - signals_width - kHierarchyPane);
  const double zoom = -std::log2(span * 200.0 / pixels);
  uint64_t marker = UINT64_MAX;
  if (!marker_signal.empty()) marker = first_nonzero(fst, marker_signal, info.start);
  std::ofstream o(out);
  if (!o) throw std::runtime_error(out + ": cannot write the layout");
  o << "[dumpfile] \"" << fst << "\"\n"
    << "[timestart] " << info.start << "\n";
  char z[96];
  if (marker == UINT64_MAX)
    std::snprintf(z, sizeof z, "*%.6f -1\n", zoom);
  else
    std::snprintf(z, sizeof z, "*%.6f %llu\n", zoom, static_cast<unsigned long long>(marker));
  o << z << body.str();
  if (!o) throw std::runtime_error(out + ": cannot write the layout");
  return res;
}

std::string chip_layout_path() { return std::string(TESSERA_LAYOUT_DIR) + "/chip.gtkw"; }
std::string filter_dir() { return TESSERA_BIN_DIR; }

}  // namespace tessera::waves
