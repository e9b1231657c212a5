// fpu-check: replays a TestFloat-style vector file through the arithmetic RTL: tpu_fpu for
// add, bf16mul, f2bf and bf2f; the vector unit's datapath for mul (fp32 x fp32: tpu_vpu_lane,
// the lane function every VPU lane runs) and for div and sqrt (tpu_fp_divsqrt, the unit each
// VPU lane instances; one operation at a time). With --arith host, the same cases through the
// host-arithmetic flavour of the chip's arithmetic (docs/numerics.md, "Two builds of the same
// chip"): the check that the flavour agrees with the vectors as the RTL does.
// The vector file format and its parser: sw/tools/fpu_vectors.h. The whole file is parsed
// before anything runs: any malformed line is reported with its number and nothing is compared. An
// expected NaN of any payload matches only the canonical NaN (the RTL's contract; TestFloat's own
// default NaN differs by platform).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "sw/tools/fpu_vectors.h"

namespace tessera::tools {

// Runs the file through the RTL and prints the report to `out`, errors to `err`; host_arith runs
// it through the chip's host-arithmetic simulation flavour instead (--arith host).
// Returns the exit status: 0 all cases match, 1 mismatches, 2 unreadable or malformed file.
int run_fpu_check(FpuOp op, const std::string& path, std::ostream& out, std::ostream& err,
                  bool host_arith = false);

}  // namespace tessera::tools
