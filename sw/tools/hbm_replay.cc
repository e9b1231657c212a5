#include "sw/tools/hbm_replay.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "Vtpu_hbm_c1.h"
#include "Vtpu_hbm_c2.h"
#include "Vtpu_hbm_c4.h"
#include "Vtpu_hbm_c8.h"
#include "Vtpu_hbm_c16.h"
#include "harness/hbm/hbm_system.h"

namespace tessera::tools {
namespace {

// Write data for burst `b` of the request on trace line `line`: a hash of both, so a read that
// returns another write's data (or an older one) is caught.
hbm::Burst write_data(uint64_t addr, int line) {
  hbm::Burst d;
  uint64_t x = addr * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(line) << 1 | 1);
  for (size_t k = 0; k < d.size(); k += 8) {
    x += 0x9E3779B97F4A7C15ull;  // splitmix64
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    for (size_t j = 0; j < 8; ++j) d[k + j] = static_cast<uint8_t>(z >> (8 * j));
  }
  return d;
}

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o += c;
    }
  }
  return o + "\"";
}

template <class Model>
int simulate(const std::vector<HbmTraceRequest>& reqs, const HbmReplayOptions& opt,
             HbmReplayReport& rep, std::ostream& err) {
  const int bursts = opt.request_bytes / hbm::kBurstBytes;
  std::ofstream cmd_trace;  // outlives the system that writes to it
  const hbm::HbmTiming timing;  // the brief's baseline, also for the REFSBs' share below
  hbm::HbmSystem<Model> sys(opt.channels, opt.channels, timing);
  if (!opt.cmd_trace.empty()) {
    cmd_trace.open(opt.cmd_trace);
    if (!cmd_trace) {
      err << "hbm-replay: cannot write the command trace " << opt.cmd_trace << "\n";
      return 2;
    }
    sys.set_trace(&cmd_trace);
  }
  hbm::HbmPortDriver<Model> drv(sys, 1, {100, 100, true});
  const uint64_t start = sys.cycle();  // trace cycle 0: the first cycle after reset
  for (const auto& t : reqs) {
    hbm::HbmRequest r;
    r.write = t.write;
    r.addr = t.addr;
    r.bursts = bursts;
    r.id = t.line & 15;
    r.not_before = start + t.cycle;
    if (r.write) {
      for (int b = 0; b < bursts; ++b) r.data.push_back(write_data(t.addr + 32ull * b, t.line));
    }
    // Spread over the ports by request index; one address always takes the same port, so
    // requests to it stay in trace order.
    drv.submit(static_cast<int>((t.addr / static_cast<uint64_t>(opt.request_bytes)) %
                                static_cast<uint64_t>(opt.channels)),
               std::move(r));
  }
  // A hang guard, far beyond any legal schedule: every burst a row miss after the last cycle.
  const uint64_t last = reqs.empty() ? 0 : reqs.back().cycle;
  const uint64_t limit = last + 1'000'000 + 200ull * bursts * reqs.size();
  try {
    drv.run(limit);
    sys.finish();
  } catch (const std::exception& e) {
    err << "hbm-replay: simulation failed at cycle " << sys.cycle() - start << ": " << e.what()
        << "\n";
    return 1;
  }
  if (drv.errors() != 0) {
    err << "hbm-replay: " << drv.errors() << " scoreboard mismatch(es):\n";
    for (const auto& m : drv.mismatches()) err << "  " << m << "\n";
    return 1;
  }

  const auto& res = drv.results();
  rep.reads = res.read_requests;
  rep.writes = res.write_requests;
  rep.bytes = (res.read_bursts + res.write_bursts) * hbm::kBurstBytes;
  rep.cycles = res.first_accept == UINT64_MAX ? 0 : res.last_response + 1 - res.first_accept;
  rep.peak_gbps = 16.0 * opt.channels;
  rep.bandwidth_gbps = rep.cycles ? static_cast<double>(rep.bytes) / rep.cycles : 0.0;
  rep.percent_of_peak = 100.0 * rep.bandwidth_gbps / rep.peak_gbps;
  std::vector<uint64_t> lat = res.read_latencies;
  rep.have_reads = !lat.empty();
  if (rep.have_reads) {
    std::sort(lat.begin(), lat.end());
    double sum = 0;
    for (uint64_t l : lat) sum += static_cast<double>(l);
    rep.avg_read_latency = sum / lat.size();
    const size_t rank = (99 * lat.size() + 99) / 100;  // nearest rank: ceil(0.99 n)
    rep.p99_read_latency = lat[rank - 1];
  }
  for (const auto& s : sys.stats()) {
    rep.acts += s.act;
    rep.column_commands += s.rd + s.wr;
    rep.row_hits += s.row_hits;
    rep.unused_acts += s.unused_acts;
    // A REFSB holds one bank of banks() for tRFCSB: its share of the pseudo-channel's time.
    rep.refresh_cycles += s.refresh_cycles + s.refsb * static_cast<uint64_t>(timing.trfcsb) /
                                                 static_cast<uint64_t>(timing.banks());
  }
  rep.row_hit_rate =
      rep.column_commands ? static_cast<double>(rep.row_hits) / rep.column_commands : 0.0;
  return 0;
}

}  // namespace

void print_hbm_report(const HbmReplayReport& r, const std::string& trace, bool json,
                      std::ostream& out) {
  char buf[4096];
  if (json) {
    const std::string avg = r.have_reads ? std::to_string(r.avg_read_latency) : "null";
    const std::string p99 = r.have_reads ? std::to_string(r.p99_read_latency) : "null";
    std::snprintf(
        buf, sizeof buf,
        "{\"trace\": %s, \"channels\": %d, \"request_bytes\": %d, \"requests\": %llu, "
        "\"reads\": %llu, \"writes\": %llu, \"bytes\": %llu, \"cycles\": %llu, "
        "\"bandwidth_gbps\": %.4f, \"peak_gbps\": %.1f, \"percent_of_peak\": %.3f, "
        "\"avg_read_latency_cycles\": %s, \"p99_read_latency_cycles\": %s, "
        "\"acts\": %llu, \"column_commands\": %llu, \"row_hits\": %llu, "
        "\"row_hit_rate\": %.5f, \"unused_acts\": %llu, \"refresh_cycles\": %llu}\n",
        json_string(trace).c_str(), r.channels, r.request_bytes,
        static_cast<unsigned long long>(r.reads + r.writes),
        static_cast<unsigned long long>(r.reads), static_cast<unsigned long long>(r.writes),
        static_cast<unsigned long long>(r.bytes), static_cast<unsigned long long>(r.cycles),
        r.bandwidth_gbps, r.peak_gbps, r.percent_of_peak, avg.c_str(), p99.c_str(),
        static_cast<unsigned long long>(r.acts), static_cast<unsigned long long>(r.column_commands),
        static_cast<unsigned long long>(r.row_hits), r.row_hit_rate,
        static_cast<unsigned long long>(r.unused_acts),
        static_cast<unsigned long long>(r.refresh_cycles));
    out << buf;
    return;
  }
  out << "trace: " << trace << " (" << r.channels << " pseudo-channel(s), " << r.request_bytes
      << "-byte requests)\n";
  out << "requests: " << r.reads + r.writes << " (" << r.reads << " reads, " << r.writes
      << " writes)\n";
  out << "bytes: " << r.bytes << "\n";
  out << "cycles: " << r.cycles << " (first request accepted to last response)\n";
  std::snprintf(buf, sizeof buf,
                "bandwidth: %.2f GB/s\npeak: %.1f GB/s\npercent of peak: %.2f %%\n",
                r.bandwidth_gbps, r.peak_gbps, r.percent_of_peak);
  out << buf;
  if (r.have_reads) {
    std::snprintf(buf, sizeof buf,
                  "read latency mean: %.2f cycles\nread latency p99: %llu cycles\n",
                  r.avg_read_latency, static_cast<unsigned long long>(r.p99_read_latency));
    out << buf;
  } else {
    out << "read latency: no reads\n";
  }
  std::snprintf(buf, sizeof buf,
                "row-hit rate: %.4f (%llu of %llu column commands; %llu ACT, %llu closed unused)\n",
                r.row_hit_rate, static_cast<unsigned long long>(r.row_hits),
                static_cast<unsigned long long>(r.column_commands),
                static_cast<unsigned long long>(r.acts),
                static_cast<unsigned long long>(r.unused_acts));
  out << buf;
  out << "refresh cycles: " << r.refresh_cycles << " (all channels)\n";
}

int run_hbm_replay(const std::string& trace_path, const HbmReplayOptions& opt, std::ostream& out,
                   std::ostream& err) {
  if (opt.channels != 1 && opt.channels != 2 && opt.channels != 4 && opt.channels != 8 &&
      opt.channels != 16) {
    err << "hbm-replay: --channels " << opt.channels
        << " is not supported; the built models have 1, 2, 4, 8 or 16 pseudo-channels\n";
    return 2;
  }
  if (opt.request_bytes < 32 || opt.request_bytes > 512 || opt.request_bytes % 32 != 0) {
    err << "hbm-replay: --request-bytes " << opt.request_bytes
        << " is not supported; use 32, 64, 96, ..., 512 (a multiple of 32 up to 512)\n";
    return 2;
  }
  std::ifstream in(trace_path);
  if (!in) {
    err << "hbm-replay: cannot open trace " << trace_path << "\n";
    return 2;
  }
  const HbmTraceParseResult parsed = parse_hbm_trace(in, opt.channels, opt.request_bytes);
  if (!parsed.errors.empty()) {
    const size_t shown = std::min<size_t>(parsed.errors.size(), 20);
    for (size_t i = 0; i < shown; ++i) {
      err << trace_path << ":" << parsed.errors[i].line << ": " << parsed.errors[i].reason << "\n";
    }
    if (parsed.errors.size() > shown) {
      err << trace_path << ": " << parsed.errors.size() - shown << " more malformed line(s)\n";
    }
    err << "hbm-replay: malformed trace, nothing simulated\n";
    return 2;
  }
  HbmReplayReport rep;
  rep.channels = opt.channels;
  rep.request_bytes = opt.request_bytes;
  int status;
  switch (opt.channels) {
    case 1:
      status = simulate<Vtpu_hbm_c1>(parsed.requests, opt, rep, err);
      break;
    case 2:
      status = simulate<Vtpu_hbm_c2>(parsed.requests, opt, rep, err);
      break;
    case 4:
      status = simulate<Vtpu_hbm_c4>(parsed.requests, opt, rep, err);
      break;
    case 8:
      status = simulate<Vtpu_hbm_c8>(parsed.requests, opt, rep, err);
      break;
    default:
      status = simulate<Vtpu_hbm_c16>(parsed.requests, opt, rep, err);
      break;
  }
  if (status != 0) return status;
  print_hbm_report(rep, trace_path, opt.json, out);
  return 0;
}

}  // namespace tessera::tools
