// HBM2 timings the tests share besides the brief's baseline (hbm::HbmTiming{}).
#pragma once

#include "harness/hbm/hbm_timing.h"

namespace tessera::test {

// Every value differs from the baseline and from each other, tRC > tRAS + tRP and
// tFAW > 4 x tRRD_S (so each rule can be broken alone), and tREFI = 200 makes refresh
// frequent: a rule or a controller counter that reads the wrong parameter cannot pass.
// sim/CMakeLists.txt builds Vtpu_hbm_ctrl_alt with these values.
inline hbm::HbmTiming distinct_hbm_timing() {
  hbm::HbmTiming t;
  t.cl = 17;
  t.cwl = 5;
  t.trcd = 13;
  t.trp = 11;
  t.tras = 29;
  t.trc = 43;
  t.twr = 19;
  t.trtp = 7;
  t.tccd_s = 3;
  t.tccd_l = 6;
  t.trrd_s = 4;
  t.trrd_l = 9;
  t.tfaw = 23;
  t.twtr_s = 8;
  t.twtr_l = 10;
  t.trefi = 200;
  t.trfc = 37;
  t.trfcsb = 31;
  t.trrefd = 12;
  return t;
}

}  // namespace tessera::test
