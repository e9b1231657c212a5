// Per-phase report, timeline and roofline of an rtl training step (step_report.h).
#include "sw/tools/step_report.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "tessera/isa_gen.h"

namespace tessera::tools {

std::vector<PhaseTiming> phase_timings(const compiler::StepStats& stats, uint64_t prog_addr,
                                       const driver::RunReport& run, int channels) {
  const auto& ph = stats.phases;
  std::vector<PhaseTiming> out(ph.size());
  for (size_t p = 0; p < ph.size(); ++p) {
    out[p].name = ph[p].name;
    out[p].roof = compiler::roofline(ph[p], channels);
  }
  if (run.samples.empty() || ph.empty()) return out;
  auto phase_of = [&](uint32_t pc) {
    const uint64_t i = pc >= prog_addr ? (pc - prog_addr) / 16 : 0;
    size_t p = 0;
    while (p + 1 < ph.size() && i >= ph[p + 1].first_instruction) ++p;
    return p;
  };
  // The first sample at which decode is in each phase (phases are entered in order).
  std::vector<size_t> first(ph.size(), run.samples.size());
  for (size_t s = 0; s < run.samples.size(); ++s) {
    const size_t p = phase_of(run.samples[s].pc);
    for (size_t q = 0; q <= p; ++q)
      if (first[q] == run.samples.size()) first[q] = s;
  }
  driver::TraceSample end;  // the run's totals
  end.cycle = run.cycles;
  end.busy = {run.perf[isa::PERF_DMA_BUSY], run.perf[isa::PERF_MXU_BUSY],
              run.perf[isa::PERF_VPU_BUSY]};
  end.macs = run.perf[isa::PERF_MACS];
  end.hbm_bytes = run.perf[isa::PERF_HBM_RD] + run.perf[isa::PERF_HBM_WR];
  end.hbm_bus = run.hbm_pins[0];
  end.hbm_turns = run.hbm_pins[1];
  end.hbm_refs = run.hbm_pins[2];
  for (size_t p = 0; p < ph.size(); ++p) {
    const driver::TraceSample& a = first[p] < run.samples.size() ? run.samples[first[p]] : end;
    const driver::TraceSample& b =
        p + 1 < ph.size() && first[p + 1] < run.samples.size() ? run.samples[first[p + 1]] : end;
    out[p].begin = a.cycle;
    out[p].end = b.cycle;
    for (int u = 0; u < 3; ++u) out[p].busy[u] = b.busy[u] - a.busy[u];
    out[p].macs = b.macs - a.macs;
    out[p].hbm_bytes = b.hbm_bytes - a.hbm_bytes;
    out[p].hbm_bus = b.hbm_bus - a.hbm_bus;
    out[p].hbm_turns = b.hbm_turns - a.hbm_turns;
    out[p].hbm_refs = b.hbm_refs - a.hbm_refs;
  }
  return out;
}

std::string phase_report(const std::vector<PhaseTiming>& phases, int n, int channels) {
  std::ostringstream o;
  o << "phase         cycles   share  DMA busy  MXU busy  VPU busy  MXU util   roofline  binds  "
       "cycles/roofline  MXU bound/busy  MACs/HBM byte  HBM bus  R/W turns  REFs\n";
  uint64_t total = 0;
  for (const auto& p : phases) total += p.end - p.begin;
  for (const auto& p : phases) {
    const double c = static_cast<double>(p.end - p.begin);
    const uint64_t bound = p.roof.bound();
    auto pct = [&](double x) {
      std::ostringstream s;
      s << std::fixed << std::setprecision(1) << (c > 0 ? 100.0 * x / c : 0.0) << "%";
      return s.str();
    };
    o << std::left << std::setw(12) << p.name << std::right << std::setw(9) << (p.end - p.begin)
      << std::setw(8) << pct(total ? c * c / double(total) : 0) << std::setw(10)
      << pct(double(p.busy[0])) << std::setw(10) << pct(double(p.busy[1])) << std::setw(10)
      << pct(double(p.busy[2])) << std::setw(10) << pct(double(p.macs) / (double(n) * n))
      << std::setw(11) << bound << std::setw(7) << p.roof.unit() << std::setw(17) << std::fixed
      << std::setprecision(3) << (bound ? c / double(bound) : 0.0) << std::setw(16)
      << (p.busy[1] ? double(p.roof.mxu) / double(p.busy[1]) : 0.0) << std::setw(15)
      << std::setprecision(2) << (p.hbm_bytes ? double(p.macs) / double(p.hbm_bytes) : 0.0)
      << std::defaultfloat << std::setw(9) << pct(double(p.hbm_bus) / channels) << std::setw(11)
      << p.hbm_turns << std::setw(6) << p.hbm_refs << "\n";
  }
  return o.str();
}

void write_chrome_trace(const std::string& path, const std::vector<PhaseTiming>& phases,
                        const driver::RunReport& run) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error(path + ": cannot write");
  f << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"clock\":\"1 cycle = 1 ns (nominal 1 GHz)\"},"
       "\"traceEvents\":[\n";
  bool first = true;
  auto event = [&](const std::string& name, int tid, uint64_t b, uint64_t e) {
    if (e <= b) return;
    f << (first ? "" : ",\n") << "{\"name\":\"" << name
      << "\",\"ph\":\"X\",\"pid\":0,\"tid\":" << tid << ",\"ts\":" << std::fixed
      << std::setprecision(3) << double(b) / 1000.0 << ",\"dur\":" << double(e - b) / 1000.0
      << std::defaultfloat << "}";
    first = false;
  };
  const char* track[] = {"program phase", "DMA", "MXU", "VPU"};
  for (int t = 0; t < 4; ++t) {
    f << (first ? "" : ",\n") << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" << t
      << ",\"args\":{\"name\":\"" << track[t] << "\"}}";
    first = false;
  }
  for (const auto& p : phases) event(p.name, 0, p.begin, p.end);
  // Per unit: intervals of consecutive samples with each UNIT_STATE bit set (docs/isa.md).
  for (int u = 0; u < 3; ++u)
    for (int bit : {0, 1, 2, 3}) {
      static const char* kNames[] = {"instructions queued", "busy", "held by WAIT",
                                     "refused (unit back-pressure)"};
      const char* name = kNames[bit];
      bool on = false;
      uint64_t since = 0;
      for (const auto& s : run.samples) {
        const bool now = (s.unit_state >> (4 * u + bit)) & 1u;
        if (now && !on) since = s.cycle;
        if (!now && on) event(name, 1 + u, since, s.cycle);
        on = now;
      }
      if (on) event(name, 1 + u, since, run.cycles);
    }
  f << "\n]}\n";
}

void write_roofline(const std::string& png, const std::vector<PhaseTiming>& phases, int n,
                    double hbm_bytes_per_cycle) {
  const std::string dat = png + ".dat", gp = png + ".gp";
  {
    std::ofstream d(dat);
    for (const auto& p : phases) {
      const double c = double(p.end - p.begin);
      if (c <= 0 || p.hbm_bytes == 0 || p.macs == 0) continue;
      d << p.name << " " << double(p.macs) / double(p.hbm_bytes) << " " << double(p.macs) / c
        << "\n";
    }
  }
  std::ofstream g(gp);
  const double peak = double(n) * n;
  g << "set terminal pngcairo size 900,640 noenhanced\nset output '" << png << "'\n"
    << "set logscale xy\nset xlabel 'arithmetic intensity (MACs per HBM byte)'\n"
    << "set ylabel 'MACs per cycle'\nset title 'Training step phases on the " << n << "x" << n
    << " chip (rtl)'\nset key bottom right\nset xrange [0.01:10000]\nset yrange [0.1:" << peak * 2
    << "]\n"
    << "roof(x) = (x * " << hbm_bytes_per_cycle << " < " << peak << ") ? x * "
    << hbm_bytes_per_cycle << " : " << peak << "\n"
    << "plot roof(x) with lines lw 2 title 'roof: MXU " << peak << " MACs/cycle, HBM "
    << hbm_bytes_per_cycle << " B/cycle', '" << dat
    << "' using 2:3 with points pt 7 ps 1.5 title 'phases', '" << dat
    << "' using 2:3:1 with labels offset 1,1 notitle\n";
  g.close();
  const std::string cmd = "gnuplot '" + gp + "' 2>&1";
  std::FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run gnuplot");
  std::string output;
  char buf[256];
  while (std::fgets(buf, sizeof buf, pipe)) output += buf;
  if (pclose(pipe) != 0) throw std::runtime_error("gnuplot failed: " + output);
}

}  // namespace tessera::tools
