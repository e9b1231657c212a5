// A phase's roofline bound and the unit that sets it (tessera/compiler.h).
#include <algorithm>

#include "tessera/compiler.h"

namespace tessera::compiler {

uint64_t Roofline::bound() const { return std::max({mxu, vpu, dma, hbm, ici, seq}); }

const char* Roofline::unit() const {
  const uint64_t b = bound();
  if (b == 0) return "-";
  if (mxu == b) return "MXU";
  if (vpu == b) return "VPU";
  if (dma == b) return "DMA";
  if (hbm == b) return "HBM";
  if (ici == b) return "ICI";
  return "SEQ";
}

uint64_t ici_flit_cycles() {
  const uint64_t flit_bytes = chip_params::FlitW / 8, link = chip_params::ICI_LINK_BYTES;
  return (flit_bytes + link - 1) / link;
}

uint64_t hbm_cycles(uint64_t dma_bytes, uint64_t instructions, int channels) {
  const uint64_t peak = kHbmBytesPerCycle * static_cast<uint64_t>(std::max(1, channels));
  const uint64_t bytes = dma_bytes + instructions * isa::kInstructionBytes;  // fetched once
  return (bytes + peak - 1) / peak;
}

Roofline roofline(const StepStats::Phase& p, int channels) {
  Roofline r;
  r.mxu = p.mxu_bound;
  r.vpu = p.vpu;
  r.dma = p.dma_cycles;
  r.hbm = hbm_cycles(p.hbm_bytes, p.instructions, channels);
  r.ici = p.ici_flits * ici_flit_cycles();
  r.seq = p.executed;
  return r;
}

}  // namespace tessera::compiler
