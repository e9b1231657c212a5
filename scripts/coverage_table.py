#!/usr/bin/env python3
"""Per-block RTL coverage from a Verilator coverage file (verilator_coverage --write output).

Usage: coverage_table.py MERGED.dat [--uncovered N] [--waivers FILE]

A point is identified by its source (file, line, column), kind and comment, not by the
instance it sits in: a line of tpu_mxu_pe.sv is covered when any PE of any model the
regression built executed it, the way a block is signed off (docs/testing.md, "Coverage").
Kinds: `line` (each source line of a statement block or branch arm, Verilator's v_line and
v_branch pages, expanded by their line lists; user cover points, v_user, count as their line)
and `toggle` (each bit of each signal seen going 0->1 and 1->0, v_toggle).

Waivers: lines of FILE are `<file> <kind> <signal prefix or line number> # reason`; a waived point
counts neither as reached nor as missed, and the table prints how many each block waives.
Prints a Markdown table per block (one row per RTL file), then with --uncovered the first N
points no test reached in each block.
"""
import argparse
import collections
import re
import sys


def parse_points(path):
    """Yields (key dict, count) for each C line of a Verilator coverage file."""
    with open(path, "rb") as f:
        for raw in f:
            if not raw.startswith(b"C '"):
                continue
            end = raw.rindex(b"'")
            body = raw[3:end].decode("utf-8", "replace")
            count = int(raw[end + 1:].strip())
            keys = {}
            for field in body.split("\x01"):
                if not field:
                    continue
                k, _, v = field.partition("\x02")
                keys[k] = v
            yield keys, count


def expand_lines(spec, default):
    lines = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        lines.extend(range(int(lo), int(hi or lo) + 1))
    return lines or [default]


def kind_of(keys):
    page = keys.get("page", "")
    if page.startswith("v_toggle"):
        return "toggle"
    if page.startswith(("v_line", "v_branch", "v_user")):
        return "line"
    return None


def load_waivers(path):
    waivers = []
    if not path:
        return waivers
    with open(path) as f:
        for n, line in enumerate(f, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            parts = text.split(None, 2)
            if len(parts) != 3 or parts[1] not in ("line", "toggle") or "#" not in line:
                sys.exit(f"{path}:{n}: expected `<file> line|toggle <prefix> # reason`")
            waivers.append((parts[0], parts[1], parts[2]))
    return waivers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dat")
    ap.add_argument("--uncovered", type=int, default=0)
    ap.add_argument("--waivers")
    args = ap.parse_args()
    waivers = load_waivers(args.waivers)

    # (file, kind, line, column, comment) -> max count over instances and models
    points = {}
    for keys, count in parse_points(args.dat):
        kind = kind_of(keys)
        if kind is None:
            continue
        f = keys.get("f", "?")
        m = re.search(r"((?:tests/)?rtl/.*)$", f)
        f = m.group(1) if m else f
        if kind == "line":
            # A line point stands for the statements of one block; S lists their lines. A
            # source line is reached when any block containing it ran (in any instance).
            for line in expand_lines(keys.get("S", ""), int(keys.get("l", 0))):
                ident = (f, kind, line, 0, "")
                points[ident] = max(points.get(ident, 0), count)
        else:
            ident = (f, kind, int(keys.get("l", 0)), int(keys.get("n", 0)), keys.get("o", ""))
            points[ident] = max(points.get(ident, 0), count)

    stats = collections.defaultdict(lambda: {"line": [0, 0], "toggle": [0, 0], "waived": 0})
    missed = collections.defaultdict(list)
    for (f, kind, line, col, comment), count in sorted(points.items()):
        if any(f.endswith(wf) and kind == wk and
               (comment.startswith(wp) if kind == "toggle" else str(line) == wp)
               for wf, wk, wp in waivers):
            stats[f]["waived"] += 1
            continue
        s = stats[f][kind]
        s[1] += 1
        if count > 0:
            s[0] += 1
        else:
            missed[f].append(f"{f}:{line} {kind} {comment}")

    def pct(hit, total):
        return f"{100.0 * hit / total:.1f}%" if total else "-"

    print("| block | lines | line coverage | toggle bits | toggle coverage | waived |")
    print("|---|---|---|---|---|---|")
    tot = {"line": [0, 0], "toggle": [0, 0]}
    for f in sorted(stats):
        s = stats[f]
        for k in tot:
            tot[k][0] += s[k][0]
            tot[k][1] += s[k][1]
        print(f"| `{f}` | {s['line'][0]}/{s['line'][1]} | {pct(*s['line'])} | "
              f"{s['toggle'][0]}/{s['toggle'][1]} | {pct(*s['toggle'])} | {s['waived']} |")
    print(f"| **all** | {tot['line'][0]}/{tot['line'][1]} | **{pct(*tot['line'])}** | "
          f"{tot['toggle'][0]}/{tot['toggle'][1]} | **{pct(*tot['toggle'])}** | |")
    if args.uncovered:
        for f in sorted(missed):
            print(f"\n{f}: {len(missed[f])} points not reached")
            for p in missed[f][: args.uncovered]:
                print("  " + p)


if __name__ == "__main__":
    main()
