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

Roofline roofline(const StepStats::Phase& p, int channels) {
  const uint64_t peak = kHbmBytesPerCycle * static_cast<uint64_t>(std::max(1, channels));
  // HBM carries the DMA's bursts and the phase's instructions, fetched once as stored
  const uint64_t hbm = p.hbm_bytes + p.instructions * isa::kInstructionBytes;
  return {
      p.mxu_bound, p.vpu, p.dma_cycles, (hbm + peak - 1) / peak, p.ici_flits * ici_flit_cycles(),
      p.executed};
}

}  // namespace tessera::compiler
