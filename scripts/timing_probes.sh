#!/usr/bin/env bash
# timing_probes.sh: the small rtl programs behind two findings in docs/compiler.md ("MXU bursts")
# and docs/memory.md (posted writes), run on the N = 16 chip with `tessera run --array 16
# --backend rtl`; prints each program's cycles and unit-busy counters.
#   mxu_gG:      G conv_fwd items back to back (2 tiles each: MXU.LDW + a 52-row MXU.MM)
#   mxu_sig_gG:  the same with a SIGNAL after every MM (the array drains at each)
#   dma_im2col:  20 conv_fwd im2col walks (UB to UB, 3-element runs)
#   dma_store26: 20 UB-to-HBM stores of 26 words (a pooled row's features)
#   dma_store8:  20 UB-to-HBM stores of 8 words (its argmax codes)
#   vpu_base:    an empty program (the others' fixed cost)
#   vpu_add, vpu_sqrt, vpu_div, vpu_ldf32, vpu_stf32, vpu_ldbf16: 200 of the one VPU instruction
#   vpu_adam:    50 Adam updates of one vector as the pre-pipelining compiler emitted them
#   dma_rB_pP:   122,880 bytes HBM -> UB in 20 copies, runs of B bytes P bytes apart
#   dma_state20, dma_state1: the same bytes as 768-byte runs 9,408 apart (the MLP's interleaved
#                Adam state), in 20 copies and in one
#   dma_contig20: the same bytes in 20 contiguous copies
#   dma_adam_mix: 12 pieces of the MLP's optimizer epilogue copies (state in, state out, bf16
#                copy out: 339,456 bytes)
# (docs/performance.md, the MLP step)
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
write("vpu_base", [])
n = 200
write("vpu_add", ["vpu.op add, v1, v2, v3, v0"] * n)
write("vpu_sqrt", ["vpu.op sqrt, v1, v2, v0, v0"] * n)
write("vpu_div", ["vpu.op div, v1, v2, v3, v0"] * n)
write("vpu_ldf32", [f"vpu.ld f32, v1, 0x{0x100 + 64 * (i % 32):x}" for i in range(n)])
write("vpu_stf32", [f"vpu.st f32, v1, 0x{0x100 + 64 * (i % 32):x}" for i in range(n)])
write("vpu_ldbf16", [f"vpu.ld bf16, v1, 0x{0x100 + 32 * (i % 32):x}" for i in range(n)])
adam = []
for i in range(50):  # g w m v loaded (g from the UB: an ACC read needs a written row), 12 ops, 4 stores
    a = 0x100 + 64 * 3 * (i % 8)
    adam += ["vpu.ld f32, v6, 0x3000", f"vpu.ld f32, v1, 0x{a:x}", f"vpu.ld f32, v2, 0x{a + 64:x}",
             f"vpu.ld f32, v3, 0x{a + 128:x}",
             "vpu.op mul, v7, v8, v2, v0", "vpu.op mul, v9, v10, v6, v0", "vpu.op add, v2, v7, v9, v0",
             "vpu.op mul, v7, v6, v6, v0", "vpu.op mul, v7, v11, v7, v0", "vpu.op mul, v9, v12, v3, v0",
             "vpu.op add, v3, v9, v7, v0", "vpu.op mul, v7, v13, v2, v0", "vpu.op sqrt, v9, v3, v0, v0",
             "vpu.op add, v9, v9, v14, v0", "vpu.op div, v7, v7, v9, v0", "vpu.op sub, v1, v1, v7, v0",
             f"vpu.st f32, v3, 0x{a + 128:x}", f"vpu.st f32, v1, 0x{a:x}",
             f"vpu.st f32, v2, 0x{a + 64:x}", f"vpu.st bf16, v1, 0x{0x2000 + 32 * (i % 8):x}"]
write("vpu_adam", adam)
def load(name, e, run, pitch, copies, dst_pitch, ub_step):
    elems, rows = run // e, 122880 // run // copies
    write(name, [f"dma.loop src, 0, {elems}, {e}, 1, 0", f"dma.loop src, 1, {rows}, {pitch}, 1, 0",
                 f"dma.loop dst, 0, {elems}, {e}, 1, 0", f"dma.loop dst, 1, {rows}, {dst_pitch}, 1, 0"] +
          [f"dma.copy hbm, ub, {e}, 0x{0x100000 + i * rows * pitch:x}, 0x{(i % 2) * ub_step:x}"
           for i in range(copies)])
for run in (32, 64, 128, 256):
    load(f"dma_r{run}_p1568", 2, run, 1568, 20, run, 0x4000)
for pitch in (256, 320):
    load(f"dma_r64_p{pitch}", 2, 64, pitch, 20, 64, 0x4000)
load("dma_state20", 4, 768, 9408, 20, 768, 0x2000)
load("dma_state1", 4, 768, 9408, 1, 0, 0)
# the MLP's optimizer epilogue: per piece of 17 W^T rows, the next piece's interleaved state in
# (768-byte runs 9,408 apart), this piece's state out, its bf16 copy out (128-byte runs)
mix = []
for i in range(12):
    mix += ["dma.loop src, 0, 192, 4, 1, 0", "dma.loop src, 1, 17, 9408, 1, 0",
            "dma.loop dst, 0, 192, 4, 1, 0", "dma.loop dst, 1, 17, 768, 1, 0",
            f"dma.copy hbm, ub, 4, 0x{0x100000 + (i + 1) * 768:x}, 0x{((i + 1) % 2) * 0x4000:x}",
            "dma.loop src, 1, 17, 768, 1, 0", "dma.loop dst, 1, 17, 9408, 1, 0",
            f"dma.copy ub, hbm, 4, 0x{(i % 2) * 0x4000:x}, 0x{0x100000 + i * 768:x}",
            "dma.loop src, 0, 64, 2, 1, 0", "dma.loop src, 1, 17, 128, 1, 0",
            "dma.loop dst, 0, 64, 2, 1, 0", "dma.loop dst, 1, 17, 1568, 1, 0",
            f"dma.copy ub, hbm, 2, 0x{0x8000 + (i % 2) * 0x1000:x}, 0x{0x900000 + i * 128:x}"]
write("dma_adam_mix", mix)
write("dma_contig20", ["dma.loop src, 0, 1536, 4, 1, 0", "dma.loop dst, 0, 1536, 4, 1, 0"] +
      [f"dma.copy hbm, ub, 4, 0x{0x100000 + i * 6144:x}, 0x{(i % 4) * 0x2000:x}" for i in range(20)])
PY
for p in mxu_g1 mxu_g2 mxu_g4 mxu_sig_g1 mxu_sig_g2 mxu_sig_g4 dma_im2col dma_store26 dma_store8 \
    vpu_base vpu_add vpu_sqrt vpu_div vpu_ldf32 vpu_stf32 vpu_ldbf16 vpu_adam \
    dma_r32_p1568 dma_r64_p1568 dma_r128_p1568 dma_r256_p1568 dma_r64_p256 dma_r64_p320 \
    dma_state20 dma_state1 dma_contig20 dma_adam_mix; do
  out=$("$tessera" run --array 16 --backend rtl "$dir/$p.s")
  printf '%-14s %s\n' "$p" "$(grep -E '^  (cycles|mxu_busy|dma_busy|vpu_busy) ' <<< "$out" | tr -s ' ' | tr '\n' ' ')"
done
