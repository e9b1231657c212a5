#!/usr/bin/env bash
# The README's figures from a `make train` run folder:
#   scripts/readme_figures.sh runs/<timestamp>
#   scripts/readme_figures.sh --cycles-only RUN_DIR   (the cycle-report block alone: every step
#       of a run takes the same cycles, so a few steps of make train's configuration give it)
# - docs/img/loss.png: the run's metrics.csv drawn by the same gnuplot script that
#   sw/runlog/plot.cc (plot_training_curves) writes into the run as loss.png.gp;
# - the README block between `<!-- cycle-report` and `<!-- /cycle-report -->`: the rtl step's
#   lines of the run's cycle_report.txt (its totals, "rtl step:" to the HBM line, then the
#   per-phase table the report starts with).
# Needs gnuplot (apt-get install gnuplot-nox) and python3. Commit the two files it changes.
set -euo pipefail
cycles_only=0
if [ "${1:-}" = --cycles-only ]; then cycles_only=1; shift; fi
run=${1:?usage: scripts/readme_figures.sh RUN_DIR (a make train run folder, runs/<timestamp>)}
cd "$(dirname "$0")/.."
for f in cycle_report.txt $([ "$cycles_only" = 1 ] || echo metrics.csv); do
  [ -f "$run/$f" ] || { echo "readme_figures: $run/$f not found (is $run a rtl run folder?)" >&2; exit 2; }
done
[ "$cycles_only" = 1 ] || command -v gnuplot >/dev/null || { echo "readme_figures: needs gnuplot (apt-get install gnuplot-nox)" >&2; exit 2; }
grep -q '^rtl step:' "$run/cycle_report.txt" ||
  { echo "readme_figures: $run/cycle_report.txt has no rtl step (train with --backend rtl)" >&2; exit 2; }

if [ "$cycles_only" = 0 ]; then
mkdir -p docs/img
csv="$run/metrics.csv"
tmp=$(mktemp docs/img/loss.XXXXXX.png)
trap 'rm -f "$tmp" "$tmp.gp"' EXIT
q() { printf "'%s'" "${1//\'/\'\'}"; }  # a gnuplot single-quoted string
cat >"$tmp.gp" <<EOF
# Training curves of $csv (tessera::runlog::plot_training_curves).
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
  set terminal pngcairo noenhanced size 960,720
} else {
  set terminal png noenhanced size 960,720
}
set output $(q "$tmp")
set datafile separator ','
set grid
set multiplot layout 2,1 title $(q "$csv")
set ylabel 'loss'
set key top right
plot $(q "$csv") skip 1 using 1:2 with lines linewidth 2 title 'loss'
set xlabel 'step'
set ylabel 'accuracy'
set key bottom right
plot $(q "$csv") skip 1 using 1:3 with lines linewidth 2 linecolor 2 title 'accuracy'
unset multiplot
set output
EOF
gnuplot "$tmp.gp"
[ -s "$tmp" ] || { echo "readme_figures: gnuplot wrote no PNG" >&2; exit 1; }
mv "$tmp" docs/img/loss.png
fi

python3 - "$run/cycle_report.txt" README.md <<'PY'
import re, sys
report, readme = sys.argv[1], sys.argv[2]
lines = open(report, encoding="utf-8").read().split("\n")
# the rtl step's totals ("rtl step:" to the HBM line), then its per-phase table (the report's
# first lines, "step S: ..." to the legend under it)
start = next(i for i, l in enumerate(lines) if l.startswith("rtl step:"))
end = next((i + 1 for i in range(start, len(lines)) if lines[i].strip().startswith("HBM read")),
           len(lines))
table_end = next((i for i, l in enumerate(lines) if l.startswith("(per phase")), len(lines))
snippet = "\n".join(l.rstrip() for l in lines[start:end] + [""] + lines[:table_end]).strip("\n")
text = open(readme, encoding="utf-8").read()
block = re.compile(r"(<!-- cycle-report[^\n]*-->\n).*?(<!-- /cycle-report -->)", re.S)
if not block.search(text):
    sys.exit("readme_figures: README.md has no <!-- cycle-report --> block")
text = block.sub(lambda m: m.group(1) + "```\n" + snippet + "\n```\n" + m.group(2), text)
open(readme, "w", encoding="utf-8").write(text)
PY
if [ "$cycles_only" = 1 ]; then
  echo "readme_figures: wrote the README's cycle-report block from $run"
else
  echo "readme_figures: wrote docs/img/loss.png and the README's cycle-report block from $run"
fi
