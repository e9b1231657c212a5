#!/usr/bin/env bash
# Runs every registered test through ctest and prints a summary; exits non-zero on any failure.
set -uo pipefail
build=${1:-build}
jobs=${2:-2}
start=$(date +%s)
ctest --test-dir "$build" -j "$jobs" --output-on-failure --timeout 900
rc=$?
echo "make sim: $(( $(date +%s) - start )) s of tests; $([ $rc -eq 0 ] && echo PASS || echo FAIL)"
exit $rc
