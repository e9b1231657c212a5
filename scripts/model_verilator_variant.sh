#!/usr/bin/env bash
# The N = 16 chip model re-verilated from the working tree's rtl/ into a separate directory,
# optionally without some of the build's Verilator flags, compiled with the build's C++ flags
# and linked into OUT/systemc_cost together with the two translation units that include the
# model's headers (so its class layout may differ from the build's). For simulation-speed
# experiments that compare RTL or Verilator-flag variants by cachegrind counts
# (docs/performance.md, "Simulation speed of the chip"):
#   scripts/model_verilator_variant.sh OUT [DROPPED_FLAG...]     e.g. OUT --assert
#   valgrind --tool=cachegrind --cache-sim=yes --branch-sim=yes --cachegrind-out-file=/dev/null \
#       OUT/systemc_cost plain step 16 8
# Compare variants built by this script with each other: it compiles every file with the fast
# files' flags, so its code layout (and instruction-cache misses) differs a little from the
# build's. Needs a configured and built tree in build/.
# MODEL=Vtpu_top_n16_host re-verilates the host-arithmetic build instead (run it as
# `OUT/systemc_cost plain step 16 B host`); ADD_FLAGS="..." appends Verilator flags, e.g.
# ADD_FLAGS="--threads 2" for a multithreaded model (docs/performance.md).
set -euo pipefail
out=$(realpath -m "${1:?usage: scripts/model_verilator_variant.sh OUT [DROPPED_FLAG...]}"); shift
root=$(realpath "$(dirname "$0")/..")
model=${MODEL:-Vtpu_top_n16}
B=$root/build/sim/CMakeFiles/tessera_models.dir/$model.dir
rm -rf $out; mkdir -p $out/gen
args=$(cat $B/verilator_args.txt | tr ';' '\n' | sed -e "s|^$B$|$out/gen|" | grep -v '^/usr/bin/verilator_bin$')
for d in "$@"; do args=$(grep -v -x -- "$d" <<< "$args"); done
for f in ${ADD_FLAGS:-}; do args+=$'\n'"$f"; done
mapfile -t a <<< "$args"
verilator "${a[@]}" > $out/gen.log 2>&1
cd "$root/build"
cmds=$(ninja -t commands systemc_cost)
tmpl=$(grep "$model\.dir/.*DepSet.*\.cpp\$" <<< "$cmds" | grep -v copy_if | sed -n 1p | sed -e 's|/usr/bin/ccache ||' -e 's| -MD -MT [^ ]* -MF [^ ]*||' -e "s|-I$B |-I$out/gen |g")
objs=()
for src in $(grep -o "$out/gen/[A-Za-z0-9_]*\.cpp" $out/gen/$model.cmake | sort -u); do
  obj="$out/$(basename $src).o"
  echo "$(sed -e "s| -o [^ ]* -c [^ ]*$| -o $obj -c $src|" <<< "$tmpl")"
  objs+=("$obj")
done > $out/compile.sh
xargs -P 2 -d '\n' -n 1 bash -c < $out/compile.sh
for tu in sw/driver/rtl_device.cc sim/systemc/chip_core.cc; do
  obj="$out/$(basename $tu).o"
  line=$(grep -E " -c $root/$tu$" <<< "$cmds")
  eval "$(sed -e 's|/usr/bin/ccache ||' -e 's| -MD -MT [^ ]* -MF [^ ]*||' -e "s|-I$B |-I$out/gen |g" -e "s| -o [^ ]* -c | -o $obj -c |" <<< "$line")"
done
cp libtessera_systemc.a libtessera_driver.a "$out/"
ar r $out/libtessera_systemc.a $out/chip_core.cc.o
ar r $out/libtessera_driver.a $out/rtl_device.cc.o
link=$(tail -1 <<< "$cmds" | sed -e 's|^: && ||' -e 's| && :$||' \
         -e "s| -o bin/systemc_cost | -o $out/systemc_cost |" \
         -e "s| sim/libtessera_models.a | ${objs[*]} sim/libtessera_models.a |" -e "s| libtessera_systemc.a | $out/libtessera_systemc.a |g" -e "s| libtessera_driver.a | $out/libtessera_driver.a |g")
eval "$link"
echo "built $out/systemc_cost"
