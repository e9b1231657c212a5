#!/usr/bin/env python3
"""A run's per-phase cycles against its roofline, as the Markdown table docs/performance.md shows.

    scripts/phase_table.py RUN_DIR      (a `tessera train --backend rtl` run folder)

Reads RUN_DIR/cycle_report.txt: the profiled rtl step's phase table (cycles, unit busy shares)
and the compiler's unit bounds per phase (MXU, VPU, DMA, HBM, ICI, SEQ; the roofline is the
largest).
"""
import re
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip())
    path = sys.argv[1] + "/cycle_report.txt"
    try:
        lines = open(path, encoding="utf-8").read().split("\n")
    except OSError as e:
        sys.exit(f"phase_table: {path}: {e.strerror}")
    head = next((i for i, l in enumerate(lines) if l.startswith("phase") and "DMA busy" in l), None)
    bounds = next((i for i, l in enumerate(lines)
                   if l.startswith("phase") and "instructions" in l and "binds" in l), None)
    step = next((l for l in lines if l.startswith("step ") and "roofline bound" in l), None)
    if head is None or bounds is None or step is None:
        sys.exit(f"phase_table: {path} has no profiled rtl step (train with --backend rtl)")
    timing = {}
    for l in lines[head + 1:]:
        f = l.split()
        if not f or l.startswith("("):
            break
        timing[f[0]] = f
    # the program's table: phase, instructions, DMA elements, "<unit> bound" ..., roofline, binds
    header = lines[bounds].split()
    units = [header[i - 1] for i, w in enumerate(header) if w == "bound"]
    print("| phase | cycles | " + " | ".join(units) + " | roofline (binds) | cycles / roofline "
          "| DMA busy | MXU busy | VPU busy |")
    print("|---" * (len(units) + 7) + "|")
    for l in lines[bounds + 1:]:
        f = l.split()
        if len(f) != len(units) + 5 or f[0] not in timing:
            break
        name, vals, roof, unit = f[0], list(map(int, f[3:-2])), int(f[-2]), f[-1]
        t = timing[name]
        cyc = int(t[1])
        ratio = f"{cyc / roof:.2f}" if roof else "-"
        print(f"| {name} | {cyc:,} | " + " | ".join(f"{v:,}" for v in vals) +
              f" | {roof:,} ({unit}) | {ratio} | {t[3]} | {t[4]} | {t[5]} |")
    m = re.match(r"step \d+: (\d+) cycles; roofline bound (\d+) cycles", step)
    cyc, roof = int(m.group(1)), int(m.group(2))
    print(f"| **step** | **{cyc:,}** | " + "| " * len(units) +
          f"{roof:,} | **{cyc / roof:.2f}** | | | |")


if __name__ == "__main__":
    main()
