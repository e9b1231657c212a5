#!/usr/bin/env bash
# test_binary.sh BUILD [Suite.Name]: with a name, prints the test binary of BUILD/tests that holds
# that GoogleTest test (exit 1 if none does); without, prints "binary Suite.Name" for every test
# of every binary. Used by make waves (scripts/waves.sh) and scripts/check_wave_layouts.sh.
set -euo pipefail
build=${1:?usage: test_binary.sh BUILD [Suite.Name]}
name=${2:-}
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1  # test_systemc's banner is not a test name
list_tests() {
  for bin in "$build"/tests/test_*; do
    [ -x "$bin" ] || continue
    "$bin" --gtest_list_tests | awk -v b="$bin" '
      /^[^ ]/ { suite = $1; next }
      /^  /   { print b " " suite $1 }'
  done
}
if [ -z "$name" ]; then
  list_tests
  exit 0
fi
# awk reads to the end: an early exit would kill list_tests with SIGPIPE (and so the script).
bin=$(list_tests | awk -v t="$name" '$2 == t && !found {print $1; found = 1}')
[ -n "$bin" ] || exit 1
echo "$bin"
