// HBM2 timings the tests share besides the brief's baseline (hbm::HbmTiming{}).
#pragma once

#include "harness/hbm/hbm_timing.h"

namespace tessera::test {

// Every value differs from the baseline and from each other (tpu_pkg's HBM_ALT_*, the timing
// sim/CMakeLists.txt builds Vtpu_hbm_ctrl_alt with): a rule or a controller counter that reads
// the wrong parameter cannot pass.
inline hbm::HbmTiming distinct_hbm_timing() { return hbm::HbmTiming::alternate(); }

}  // namespace tessera::test
