#!/usr/bin/env python3
"""Sums a cachegrind event of the verilated chip by RTL block (docs/performance.md, "Simulation
speed of the chip"): each generated C++ line is charged to the first RTL signal path named on or
above it (tpu_top__DOT__u_hbm__DOT__g_pc__BRA__0__KET__... is u_hbm.g_pc[0]); lines outside the
model are charged to their file in brackets.

  scripts/model_cflags_variant.sh /tmp/vg "-g -gdwarf-4"   # valgrind 3.19 cannot read DWARF 5
  valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file=/tmp/vg/cg.out \\
      /tmp/vg/systemc_cost plain step 16 8
  scripts/cachegrind_by_block.py /tmp/vg/cg.out I1mr 2     # event, path depth

The generated files must be the ones the profiled binary was compiled from (the build tree's,
unchanged since)."""
import collections
import os
import re
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: cachegrind_by_block.py CACHEGRIND_OUT EVENT [DEPTH]  (EVENT: Ir, I1mr, ...)")
    out, event = sys.argv[1], sys.argv[2]
    depth = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    per_line = collections.Counter()
    fl, col = None, None
    with open(out) as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
                if event not in events:
                    sys.exit(f"event {event} not in {events}")
                col = events.index(event) + 1
            elif line.startswith("fl="):
                fl = line[3:].strip()
            elif line[:1].isdigit() and col is not None:
                a = line.split()
                if len(a) > col and a[col] != "0":
                    per_line[(fl, int(a[0]))] += int(a[col])
    total = sum(per_line.values())
    path = re.compile(r"tpu_top__DOT__([A-Za-z0-9_]+)")
    sources, blocks = {}, collections.Counter()
    for (fl, n), v in per_line.items():
        if ".dir/" not in fl or not fl.endswith(".cpp"):
            blocks["[" + os.path.basename(fl) + "]"] += v
            continue
        if fl not in sources:
            sources[fl] = open(fl).read().split("\n")
        text, key = sources[fl], "?"
        for i in range(min(n - 1, len(text) - 1), max(n - 400, -1), -1):
            m = path.search(text[i])
            if m:
                key = ".".join(m.group(1).split("__DOT__")[:depth])
                break
        blocks[key] += v
    print(f"{event} total {total:,}")
    for k, v in blocks.most_common(30):
        print(f"{100 * v / total:6.2f}% {k}")


if __name__ == "__main__":
    main()
