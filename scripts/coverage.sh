#!/usr/bin/env bash
# make coverage: the whole regression in a coverage build, then what it reached.
#  - RTL: every verilated model with Verilator's line, toggle and user coverage; each model
#    writes its counts when it goes away (harness/sim_ctrl.h) to $OUT/dat/<pid>-<n>.dat; they
#    are merged (verilator_coverage --write), tabulated per block (scripts/coverage_table.py,
#    waivers in scripts/coverage_waivers.txt) and rendered by genhtml into $OUT/rtl/.
#  - Host code: clang --coverage (gcov format, read through llvm-cov gcov) over sw/, rendered
#    into $OUT/sw/.
# Usage: scripts/coverage.sh            (BUILD_COV=build/cov, OUT=build/coverage, JOBS=2)
# Prints the per-block table and the sw/ summary; $OUT/summary.md holds both.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${BUILD_COV:-build/cov}
out=${OUT:-build/coverage}
jobs=${JOBS:-2}
ctest_jobs=${CTEST_JOBS:-2}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_COVERAGE=ON >/dev/null
cmake --build "$build" -j "$jobs"

rm -rf "$out"
mkdir -p "$out/dat"
find "$build" -name '*.gcda' -delete
start=$(date +%s)
# Failures are reported but do not stop the report: coverage of a red run is still worth seeing.
rc=0
TESSERA_COVERAGE_DIR="$root/$out/dat" \
  ctest --test-dir "$build" -j "$ctest_jobs" --timeout 3600 --output-on-failure \
  >"$out/ctest.log" 2>&1 || rc=$?
echo "coverage: regression $(( $(date +%s) - start )) s, ctest exit $rc ($out/ctest.log)"

# RTL
mapfile -t dats < <(find "$out/dat" -name '*.dat' | sort)
echo "coverage: ${#dats[@]} model coverage files"
verilator_coverage --write "$out/rtl.dat" "${dats[@]}" >/dev/null
rm -rf "$out/dat"
scripts/coverage_table.py "$out/rtl.dat" --waivers scripts/coverage_waivers.txt \
  --uncovered 40 >"$out/rtl_table.md"
verilator_coverage --write-info "$out/rtl.info" "$out/rtl.dat" >/dev/null
genhtml --quiet --output-directory "$out/rtl" --prefix "$root" "$out/rtl.info" \
  >"$out/genhtml_rtl.log" 2>&1 || echo "coverage: genhtml (rtl) failed, see $out/genhtml_rtl.log"

# Host code (sw/)
cat >"$out/llvm-gcov.sh" <<'EOF'
#!/bin/sh
exec llvm-cov gcov "$@"
EOF
chmod +x "$out/llvm-gcov.sh"
lcov --quiet --capture --directory "$build" --base-directory "$root" \
  --gcov-tool "$root/$out/llvm-gcov.sh" --output-file "$out/all.info" >"$out/lcov.log" 2>&1
lcov --quiet --extract "$out/all.info" "$root/sw/*" --output-file "$out/sw.info" >>"$out/lcov.log" 2>&1
genhtml --quiet --output-directory "$out/sw" --prefix "$root" "$out/sw.info" \
  >"$out/genhtml_sw.log" 2>&1 || echo "coverage: genhtml (sw) failed, see $out/genhtml_sw.log"
sw_summary=$(lcov --summary "$out/sw.info" 2>&1 | grep -E 'lines|functions')
per_file=$(lcov --list "$out/sw.info" 2>/dev/null | sed -n '/^[a-z]/p' || true)

{
  echo "## RTL (Verilator line + toggle, every model of the regression)"
  echo
  sed -n '/^|/p' "$out/rtl_table.md"
  echo
  echo "## Host code (sw/, gcov lines)"
  echo
  echo "$sw_summary"
} >"$out/summary.md"
cat "$out/summary.md"
echo
echo "coverage: HTML in $out/rtl/index.html and $out/sw/index.html; points not reached: $out/rtl_table.md"
echo "$per_file" >"$out/sw_files.txt"
exit $rc
