#!/usr/bin/env bash
# timing_probes.sh: the small rtl programs behind two findings in docs/compiler.md ("MXU bursts")
# and docs/memory.md (posted writes), run on the N = 16 chip with `tessera run --array 16
# --backend rtl`; prints each program's cycles and unit-busy counters.
#   mxu_gG:      G conv_fwd items back to back (2 tiles each: MXU.LDW + a 52-row MXU.MM)
#   mxu_sig_gG:  the same with a SIGNAL after every MM (the array drains at each)
#   dma_im2col:  20 conv_fwd im2col walks (UB to UB, 3-element runs)
#   dma_store26: 20 UB-to-HBM stores of 26 words (a pooled row's features)
#   dma_store8:  20 UB-to-HBM stores of 8 words (its argmax codes)
set -euo pipefail
cd "$(dirname "$0")/.."
tessera=${TESSERA:-build/bin/tessera}
[ -x "$tessera" ] || { echo "timing_probes: $tessera not built" >&2; exit 2; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/tessera-probes.XXXXXX")
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 - "$dir" <<'PY'
import sys
d = sys.argv[1]
def write(name, lines):
    open(f"{d}/{name}.s", "w").write("\n".join(lines + ["halt"]) + "\n")
for g in (1, 2, 4):
    for sig in (False, True):
        body = []
        for it in range(g):
            for j in range(2):
                body += [f"mxu.ldw 0x{0x100 + j * 32:x}, 64",
                         f"mxu.mm set, 0x{0x2000 + it * 0x800:x}, 32, 52, {(it * 2 + j) * 52}"]
                if sig:
                    body.append("signal mxu, sc1")
        write(f"mxu_{'sig_' if sig else ''}g{g}", body)
im2col = ["dma.loop src, 0, 3, 2, 3, 56", "dma.loop src, 1, 26, 2, 2, 56",
          "dma.loop dst, 0, 3, 2, 3, 6", "dma.loop dst, 1, 26, 32, 2, 832"]
write("dma_im2col", im2col + [f"dma.copy ub, ub, 2, 0x100, 0x{0x1000 + (r % 4) * 0x800:x}"
                              for r in range(20)])
for words, e, n in ((26, 2, 416), (8, 4, 64)):
    write(f"dma_store{words}",
          [f"dma.loop src, 0, {n}, {e}, 1, 0", f"dma.loop dst, 0, {n}, {e}, 1, 0"] +
          [f"dma.copy ub, hbm, {e}, 0x8000, 0x{0x100000 + r * 0x10000:x}" for r in range(20)])
PY
for p in mxu_g1 mxu_g2 mxu_g4 mxu_sig_g1 mxu_sig_g2 mxu_sig_g4 dma_im2col dma_store26 dma_store8; do
  out=$("$tessera" run --array 16 --backend rtl "$dir/$p.s")
  printf '%-12s %s\n' "$p" "$(grep -E '^  (cycles|mxu_busy|dma_busy) ' <<< "$out" | tr -s ' ' | tr '\n' ' ')"
done
