// GTKWave layouts for a dump (docs/testing.md, "Waveforms"). A layout in waves/ is a GTKWave
// save file with three directives of ours in its comment lines:
//   [*] filter: bf16|fp32|u32|insn|hbmcmd|none   the following traces show through the translate
//                                           filter in that mode (tessera-wave-filter: numbers
//                                           as numbers, instructions as assembly, HBM commands
//                                           by name) until the next filter directive
//   [*] colour: seq|dma|mxu|vpu|ub|hbm|ici|none   the following traces in that part's colour
//   [*] marker: SIGNAL                       the marker goes to the first time SIGNAL is nonzero
// write_layout() turns a layout into one for a given dump: every bus's width as the dump
// declares it (widths follow the array size N), the filters as absolute paths, the view zoomed
// to the dump's extent, the marker set; it returns the layout's signals the dump lacks (GTKWave
// drops a missing name silently).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tessera::waves {

struct FstInfo {
  std::map<std::string, std::string> signals;  // "TOP.a.b" -> "[63:0]" ("" for one bit)
  uint64_t start = 0, end = 0;                 // the dump's first and last time (ps)
};
// Reads an FST file's hierarchy and extent; throws std::runtime_error naming the file.
FstInfo read_fst(const std::string& path);
// The first time at or after `from` that `signal` is nonzero (UINT64_MAX: never).
uint64_t first_nonzero(const std::string& path, const std::string& signal, uint64_t from);

struct LayoutResult {
  std::vector<std::string> missing;  // signals the layout names and the dump lacks
  uint64_t start = 0, end = 0;       // the dump's extent (ps), as read_fst gives it
};
// Writes `out` from the layout `layout` for the dump `fst`. `filter_dir`: where the
// tessera-wave-filter programs are (absolute).
LayoutResult write_layout(const std::string& fst, const std::string& layout, const std::string& out,
                          const std::string& filter_dir);

// The layout for a chip dump: waves/chip.gtkw.
std::string chip_layout_path();
// The directory of the translate filter programs (bin/ of the build).
std::string filter_dir();

}  // namespace tessera::waves
