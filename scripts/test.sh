#!/usr/bin/env bash
# Sets up, checks formatting, builds and runs every test suite, then the CPU suites again under
# AddressSanitizer + UndefinedBehaviorSanitizer, then the fuzz targets for a fixed number of inputs
# (the README's second command; .ci/run calls it).
# Prints each step's wall time and a summary at the end (also when a step fails).
# LCM_TEST_QUICK=1: only setup, build and tests (a developer's inner loop; CI runs everything):
# no format, sanitize or fuzz step.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${LCM_JOBS:-$(nproc)}
names=()
times=()
summary() {
  local rc=$?
  echo "== test.sh: steps (wall seconds)"
  for i in "${!names[@]}"; do printf '   %-10s %5s s\n' "${names[$i]}" "${times[$i]}"; done
  printf '   %-10s %5s s%s\n' total "$SECONDS" "$([[ $rc -ne 0 ]] && echo "  (failed in step ${current:-?})")"
}
trap summary EXIT
step() {
  current=$1
  shift
  echo "== step $current"
  local t0=$SECONDS
  "$@"
  names+=("$current")
  times+=("$((SECONDS - t0))")
  echo "== step $current: $((SECONDS - t0)) s"
}
build() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j "$JOBS"
}
step setup scripts/setup.sh
[[ "${LCM_TEST_QUICK:-0}" == "1" ]] || step format scripts/check_format.sh
step build build
step test ctest --test-dir build --output-on-failure -j "$JOBS"
[[ "${LCM_TEST_QUICK:-0}" == "1" ]] || step sanitize scripts/test_sanitize.sh
[[ "${LCM_TEST_QUICK:-0}" == "1" ]] || step fuzz scripts/test_fuzz.sh
