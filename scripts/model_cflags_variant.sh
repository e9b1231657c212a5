#!/usr/bin/env bash
# The N = 16 chip model (Vtpu_top_n16) recompiled with other C++ flags and linked into a copy of
# systemc_cost, for simulation-speed experiments on the generated code (docs/performance.md,
# "Simulation speed of the chip": -O3, profile-guided optimisation):
#   scripts/model_cflags_variant.sh DIR "EXTRA_CXXFLAGS" ["EXTRA_LDFLAGS"]
# writes DIR/systemc_cost. The model's generated .cpp files and their compile commands are the
# build tree's (`ninja -t commands systemc_cost`); EXTRA_CXXFLAGS go last, so -O3 overrides the
# -O2. Profile-guided with GCC (the model's objects from g++, linked by the build's compiler), e.g.:
#   export MODEL_CXX=g++
#   scripts/model_cflags_variant.sh /tmp/pgo "-fprofile-generate -fprofile-update=single" -lgcov
#   /tmp/pgo/systemc_cost plain step 16 4          # writes the .gcda profiles into /tmp/pgo
#   scripts/model_cflags_variant.sh /tmp/pgo "-fprofile-use -fprofile-correction -Wno-missing-profile"
# then time /tmp/pgo/systemc_cost against build/bin/systemc_cost, interleaved.
# MODEL_CXX=g++ compiles the model with another compiler than the build's (the rest stays).
# MODEL=Vtpu_top_n16_host recompiles the host-arithmetic build of the chip instead (run it as
# `DIR/systemc_cost plain step 16 B host`).
set -euo pipefail
dir=$(realpath -m "${1:?usage: scripts/model_cflags_variant.sh DIR EXTRA_CXXFLAGS [EXTRA_LDFLAGS]}")
extra=${2:-}
ldextra=${3:-}
cd "$(dirname "$0")/../build"
mkdir -p "$dir"
cmds=$(ninja -t commands systemc_cost)
objs=()
while read -r line; do
  src=${line##* }
  obj="$dir/$(basename "$src").o"
  # the build's command without ccache and dependency files, writing into DIR
  cmd=$(sed -e 's|/usr/bin/ccache ||' -e 's| -MD -MT [^ ]* -MF [^ ]*||' \
            -e "${MODEL_CXX:+s|^[^ ]* |$MODEL_CXX |}" \
            -e "s| -o [^ ]* -c | -o $obj -c |" <<< "$line")
  echo "$cmd $extra"
  objs+=("$obj")
done < <(grep "${MODEL:-Vtpu_top_n16}\.dir/.*\.cpp\$" <<< "$cmds" | grep -v copy_if) > "$dir/compile.sh"
xargs -P "$(nproc)" -d '\n' -n 1 bash -c < "$dir/compile.sh"
# link: the model's objects ahead of the library, so its copy of the model is not pulled in
link=$(tail -1 <<< "$cmds" | sed -e 's|^: && ||' -e 's| && :$||' \
         -e "s| -o bin/systemc_cost | -o $dir/systemc_cost |" \
         -e "s| sim/libtessera_models.a | ${objs[*]} sim/libtessera_models.a |")
eval "$link $ldextra"
echo "built $dir/systemc_cost"
