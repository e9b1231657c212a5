#!/usr/bin/env bash
# check-chip-constants: the host's C++ takes every chip parameter from the header generated from
# the RTL packages (build/generated/tessera/chip_params.h and isa_gen.h; docs/architecture.md),
# never from a copy. Fails (exit 1, one `file:line: what` a finding) when C++ under sw/,
# harness/, sim/, bench/, examples/, fuzz/ or tests/ writes, outside a comment:
#   - the canonical NaN as a number (0x7FC00000, 0x7FC0): chip_params::FP32_CANON_NAN, BF16_...
#   - a pseudo-channel's size or address width (256 MiB as `256ull << 20`, `1ull << 28`, a
#     channel count shifted by 28): chip_params::HBM_PC_BYTES, HBM_PC_ADDR_BITS
#   - a performance counter by its index (`perf[7]`): isa::PERF_MACS and its siblings
#   - an HBM timing field set to a number (`t.cl = 14`): HbmTiming's defaults and alternate()
#   - the ICI flit's width (`kFlitWords = 10`): chip_params::FlitW
#   - a DMA fault code or a queue depth as a number: chip_params::DMA_FAULT_*, QUEUE_DEPTH
#   - a chip configuration's UB or ACC size (8192/64, 65536/1024, 262144/1024 bytes/rows in a
#     ub_bytes/acc_rows field or a kUbBytes/kAccRows constant): kSmallChip, kFullChip,
#     large_chip() (tessera/chip.h); a unit test of a block built at another size names it.
# A line of four or more hex literals is a table of test vectors (data) and is not checked.
# Usage: scripts/check_chip_constants.sh [--root DIR] | --self-test
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

if [ "${1:-}" = "--self-test" ]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/sw" "$tmp/tests"
  cat >"$tmp/sw/good.cc" <<'EOF'
// the canonical NaN 0x7FC00000 in a comment is fine; so is perf[7] here
uint32_t nan = chip_params::FP32_CANON_NAN;
uint64_t r = run.perf[isa::PERF_MACS];
uint32_t word = a << 24 | b << 28;  // an encoding's field, not a capacity
uint64_t limit = chip_params::HBM_PC_BYTES;
t.trefi = 0;  // a refused value, not a timing
uint64_t ub_bytes = 4096;  // a unit build's own size
EOF
  cat >"$tmp/sw/bad.cc" <<'EOF'
uint32_t nan = 0x7FC00000u;
uint64_t cap = 256ull << 20;
uint64_t cap2 = static_cast<uint64_t>(channels) << 28;
uint64_t m = r.perf[7];
t.cl = 14;
constexpr int kFlitWords = 10;
constexpr unsigned kFaultAlign = 5;
constexpr uint32_t kQueueDepth = 32;
constexpr uint64_t kUbBytes = 8192, kAccRows = 64;
EOF
  if "$0" --root "$tmp" >"$tmp/out" 2>&1; then
    echo "check-chip-constants self-test: FAILED — a tree with copies passed" >&2
    exit 1
  fi
  n="$(grep -c '^sw/bad.cc:[0-9]*: ' "$tmp/out" || true)"
  g="$(grep -c '^sw/good.cc:' "$tmp/out" || true)"
  if [ "$n" -ne 10 ] || [ "$g" -ne 0 ]; then
    echo "check-chip-constants self-test: FAILED — want 10 findings in bad.cc and 0 in good.cc," \
      "got $n and $g:" >&2
    cat "$tmp/out" >&2
    exit 1
  fi
  echo "check-chip-constants self-test: ok (10 copies found, the legitimate forms pass)"
  exit 0
fi

root="$(cd "$here/.." && pwd)"
if [ "${1:-}" = "--root" ]; then root="$(cd "$2" && pwd)"; fi

exec python3 - "$root" <<'PYTHON'
import os
import re
import sys

root = sys.argv[1]
RULES = [
    (re.compile(r"0x7[fF][cC]0{5}|0x7[fF][cC]0[uU]?\b"), "the canonical NaN: chip_params::FP32_CANON_NAN / BF16_CANON_NAN"),
    (re.compile(r"\b256(ull|ULL|u|U)? *<< *20\b|\b1(ull|ULL) *<< *28\b|channels\w*\)? *<< *28\b"),
     "a pseudo-channel's size: chip_params::HBM_PC_BYTES / HBM_PC_ADDR_BITS"),
    (re.compile(r"\bperf\[[0-9]"), "a performance counter by number: isa::PERF_*"),
    (re.compile(r"\.(cl|cwl|trcd|trp|tras|trc|twr|trtp|tccd_[sl]|trrd_[sl]|tfaw|twtr_[sl]|trefi|"
                r"trfc|trfcsb|trrefd) *= *[1-9]"), "an HBM timing value: hbm::HbmTiming{} or ::alternate()"),
    (re.compile(r"\bk?FlitW\w* *= *[0-9]"), "the ICI flit width: chip_params::FlitW"),
    (re.compile(r"\bkFault\w* *= *[0-9]"), "a DMA fault code: chip_params::DMA_FAULT_*"),
    (re.compile(r"\bk?QueueDepth\w* *= *[0-9]"), "the queue depth: chip_params::QUEUE_DEPTH"),
    (re.compile(r"\b(kUbBytes|ub_bytes) *= *(8192|65536|262144)\b"), "a chip's UB size: tessera/chip.h"),
    (re.compile(r"\b(kAccRows|acc_rows) *= *(64|1024)\b"), "a chip's ACC rows: tessera/chip.h"),
]
HEX = re.compile(r"\b0x[0-9A-Fa-f]+")
DIRS = ["sw", "harness", "sim", "bench", "examples", "fuzz", "tests"]
findings = 0
for d in DIRS:
    for dirpath, _, files in os.walk(os.path.join(root, d)):
        for f in sorted(files):
            if not f.endswith((".cc", ".h", ".cpp")):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root)
            with open(path, encoding="utf-8", errors="replace") as fh:
                for no, line in enumerate(fh, 1):
                    code = line.split("//", 1)[0]
                    if len(HEX.findall(code)) >= 4:
                        continue  # a table of test vectors: data, not a parameter
                    for rule, what in RULES:
                        if rule.search(code):
                            print(f"{rel}:{no}: {what}")
                            findings += 1
if findings:
    print(f"check-chip-constants: {findings} chip constant(s) copied by hand; take them from "
          "chip_params.h / isa_gen.h / tessera/chip.h", file=sys.stderr)
    sys.exit(1)
print("check-chip-constants: ok (every chip parameter from the generated headers)")
PYTHON
