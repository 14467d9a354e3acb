#!/usr/bin/env bash
# Sets up, checks formatting, builds and runs every test suite, then the CPU suites again under
# AddressSanitizer + UndefinedBehaviorSanitizer, then the fuzz targets for a fixed number of inputs
# (the README's second command; .ci/run calls it).
# Prints each step's wall time, the skipped test cases with why, and closes with the counts of
# the test cases its ctest runs passed, failed and skipped (scripts/test_summary.sh), also when a
# step fails: the last line is `tests: N passed, N failed, N skipped`.
# Fails when the steps wrote into the checkout (scripts/check_checkout.sh): tests use temporary
# folders. Builds with LCM_WERROR=ON: a warning in lcm's own code fails the build.
# LCM_TEST_QUICK=1: only setup, build and tests (a developer's inner loop; CI runs everything):
# no format, sanitize or fuzz step.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${LCM_JOBS:-$(nproc)}
names=()
times=()
logs=()
summary() {
  local rc=$?
  echo "== test.sh: steps (wall seconds)"
  for i in "${!names[@]}"; do printf '   %-10s %5s s\n' "${names[$i]}" "${times[$i]}"; done
  printf '   %-10s %5s s%s\n' total "$SECONDS" "$([[ $rc -ne 0 ]] && echo "  (failed in step ${current:-?})")"
  echo "== test.sh: test cases"
  local failed_step=""
  [[ $rc -ne 0 ]] && failed_step=${current:-?}
  LCM_FAILED_STEP=$failed_step scripts/test_summary.sh "${logs[@]}" ||
    echo "tests: 0 passed, 1 failed, 0 skipped"
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
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DLCM_WERROR=ON >/dev/null
  cmake --build build -j "$JOBS"
}
mark=build/checkout.test-sh.mark
step setup scripts/setup.sh
[[ "${LCM_TEST_QUICK:-0}" == "1" ]] || step format scripts/check_format.sh
scripts/check_checkout.sh mark "$mark"
step build build
logs+=("test=build/Testing/Temporary/LastTest.log")
rm -f build/Testing/Temporary/LastTest.log
step test ctest --test-dir build --output-on-failure -j "$JOBS"
if [[ "${LCM_TEST_QUICK:-0}" != "1" ]]; then
  san=${LCM_SANITIZE_BUILD:-build-san}
  logs+=("sanitize=$san/Testing/Temporary/LastTest.log")
  rm -f "$san/Testing/Temporary/LastTest.log"
  step sanitize scripts/test_sanitize.sh
  step fuzz scripts/test_fuzz.sh
fi
step checkout scripts/check_checkout.sh check "$mark"
