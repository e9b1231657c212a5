#include "sw/tools/run_tool.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "harness/waves/wave_layout.h"
#include "tessera/asm.h"
#include "tessera/driver.h"

namespace tessera::tools {
namespace {

// False with errno set when the file cannot be opened.
bool read_file(const std::string& path, std::vector<uint8_t>& bytes) {
  errno = 0;
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return true;
}

bool parse_u64(const std::string& s, uint64_t& v) {
  try {
    size_t used = 0;
    v = std::stoull(s, &used, 0);
    return used == s.size() && !s.empty();
  } catch (...) {
    return false;
  }
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

const char* kCounterNames[driver::kPerfCounters] = {
    "cycles",       "dma_busy",       "mxu_busy",    "vpu_busy",       "dma_stall",
    "mxu_stall",    "vpu_stall",      "macs",        "hbm_bytes_read", "hbm_bytes_written",
    "hbm_row_hits", "hbm_row_misses", "instructions"};

}  // namespace

int run_program(const RunOptions& opt, std::ostream& out, std::ostream& err) {
  driver::DeviceConfig cfg = driver::chip_for_array(opt.array);
  try {
    cfg.backend = driver::parse_backend(opt.backend);
  } catch (const std::exception& e) {
    err << "tessera run: " << e.what() << "\n";
    return 2;
  }
  std::vector<uint8_t> program;
  if (!read_file(opt.program, program)) {
    err << "tessera run: " << opt.program
        << ": cannot read the program: " << std::strerror(errno ? errno : ENOENT) << "\n";
    return 2;
  }
  if (ends_with(opt.program, ".s") || ends_with(opt.program, ".asm")) {
    const auto r = assembler::assemble(std::string(program.begin(), program.end()),
                                       {static_cast<uint32_t>(cfg.n)});
    if (!r.ok()) {
      for (const auto& e : r.errors) err << assembler::format_error(opt.program, e) << "\n";
      return 2;
    }
    program = r.bytes();
  } else if (program.empty() || program.size() % 16 != 0) {
    err << "tessera run: " << opt.program << ": " << program.size()
        << " bytes is not a whole number of 16-byte instructions\n";
    return 2;
  }
  struct Load {
    uint64_t addr;
    std::vector<uint8_t> bytes;
  };
  struct Dump {
    uint64_t addr, bytes;
    std::string file;
  };
  std::vector<Load> loads;
  std::vector<Dump> dumps;
  for (const auto& l : opt.loads) {
    const size_t eq = l.find('=');
    Load ld;
    if (eq == std::string::npos || !parse_u64(l.substr(0, eq), ld.addr)) {
      err << "tessera run: --load '" << l << "': expected ADDR=FILE\n";
      return 2;
    }
    if (!read_file(l.substr(eq + 1), ld.bytes)) {
      err << "tessera run: --load '" << l << "': " << l.substr(eq + 1)
          << ": cannot read: " << std::strerror(errno ? errno : ENOENT) << "\n";
      return 2;
    }
    loads.push_back(std::move(ld));
  }
  for (const auto& d : opt.dumps) {
    const size_t colon = d.find(':'), eq = d.find('=');
    Dump dp;
    if (colon == std::string::npos || eq == std::string::npos || eq < colon ||
        !parse_u64(d.substr(0, colon), dp.addr) ||
        !parse_u64(d.substr(colon + 1, eq - colon - 1), dp.bytes)) {
      err << "tessera run: --dump '" << d << "': expected ADDR:BYTES=FILE\n";
      return 2;
    }
    dp.file = d.substr(eq + 1);
    dumps.push_back(dp);
  }

  std::unique_ptr<driver::Device> dev;
  try {
    dev = driver::Device::open(cfg);
    for (const auto& l : loads) dev->write(l.addr, l.bytes);
    dev->write(opt.prog_addr, program);
    if (!opt.waves.empty()) dev->arm_waves(opt.waves, opt.waves_from, opt.waves_to);
  } catch (const std::exception& e) {
    err << "tessera run: " << e.what() << "\n";
    return 2;
  }
  driver::RunReport rep;
  try {
    rep = dev->run(opt.prog_addr, opt.timeout);
  } catch (const driver::DeviceFault& e) {
    err << "tessera run: " << e.what() << "\n";
    if (!opt.waves.empty()) write_chip_layout(opt.waves, out, err);  // the fault is in the dump
    return 1;
  } catch (const driver::DeviceTimeout& e) {
    err << "tessera run: " << e.what() << "\n";
    if (!opt.waves.empty()) write_chip_layout(opt.waves, out, err);
    return 3;
  }
  if (!opt.waves.empty() && !write_chip_layout(opt.waves, out, err)) return 2;
  out << "halted (" << driver::backend_name(cfg.backend) << " backend)";
  if (cfg.backend == driver::Backend::kRtl) out << " after " << rep.cycles << " cycles";
  out << "\n";
  for (int i = 0; i < driver::kPerfCounters; ++i) {
    out << "  " << kCounterNames[i] << " " << rep.perf[i] << "\n";
  }
  for (const auto& d : dumps) {
    const auto bytes = dev->read(d.addr, d.bytes);
    std::ofstream f(d.file, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
    if (!f) {
      err << "tessera run: --dump: " << d.file << ": cannot write: " << std::strerror(errno)
          << "\n";
      return 2;
    }
  }
  return 0;
}

bool write_chip_layout(const std::string& fst, std::ostream& out, std::ostream& err) {
  const std::string layout = std::filesystem::path(fst).replace_extension(".gtkw").string();
  try {
    const std::string abs = std::filesystem::absolute(fst).string();
    const waves::LayoutResult r =
        waves::write_layout(abs, waves::chip_layout_path(), layout, waves::filter_dir());
    out << "waveform: " << fst << " (cycles " << r.start / 1000 << " to " << r.end / 1000
        << " of the program), layout: " << layout << "\n  open it: make waves RUN=" << fst << "\n";
    for (const std::string& m : r.missing) err << "  layout signal not in the dump: " << m << "\n";
    return true;
  } catch (const std::exception& e) {
    err << "waves: " << e.what() << "\n";
    return false;
  }
}

}  // namespace tessera::tools
