#!/usr/bin/env bash
# The CPU test suites under AddressSanitizer + UndefinedBehaviorSanitizer (one CI step): configures
# build-san with LCM_SANITIZE=ON and no CUDA, builds the suites and what they run (the lcm-* tools,
# bench_model), and runs them with ctest. Exits non-zero when a suite fails or any sanitizer report
# (memory error, leak, undefined behaviour) appears, also one in a tool that a test ran.
#   LCM_JOBS           parallel build and test jobs (default: nproc)
#   LCM_SANITIZE_BUILD build folder (default: build-san)
# ASAN_OPTIONS / UBSAN_OPTIONS given by the caller are appended to the defaults below (later
# settings win).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${LCM_JOBS:-$(nproc)}
BUILD=${LCM_SANITIZE_BUILD:-build-san}

# LCM_MPI=OFF: the mpirun cases of test_mpi skip themselves here anyway (LCM_SANITIZED), and this
# way CI builds and tests the build without MPI too (test_mpi's unit cases run in it).
# LCM_SANITIZE_OPT / LCM_SANITIZE_UB_SKIP: every ASan and UBSan check (use-after-scope, null,
# alignment, object-size, vptr included), also in a folder configured before with fewer.
# LCM_WERROR=ON: a warning in lcm's own code fails the build, as in the other builds.
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLCM_SANITIZE=ON -DLCM_CUDA=OFF \
  -DLCM_CUDA_EMULATE=OFF -DLCM_MPI=OFF -DLCM_BUILD_TESTS=ON -DLCM_BUILD_BENCH=ON \
  "-DLCM_SANITIZE_OPT=-O1;-g1" -DLCM_SANITIZE_UB_SKIP= -DLCM_WERROR=ON >/dev/null
# Only the suites, the tools they depend on and bench_model (run by test_cli_edges): the other
# benchmarks are not run here and would only cost build time.
targets=(bench_model)
for src in tests/test_*.cpp; do targets+=("$(basename "$src" .cpp)"); done
cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}"

# halt_on_error: the first report ends the process. exitcode 86 (not 1): a finding in a tool is not
# mistaken for the tool's own error exit by a test that expects 1 or 2; run_tool (tests/support)
# also fails the test on a report in a tool's stderr. Leak checking is on (LeakSanitizer).
asan="halt_on_error=1:detect_leaks=1:exitcode=86:check_initialization_order=1"
ubsan="halt_on_error=1:print_stacktrace=1:exitcode=86"
export ASAN_OPTIONS="$asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="$ubsan${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# The suites' temporary folders inside the build folder: a process stopped by a sanitizer skips the
# clean-up at exit, and its leftovers then stay out of the shared /tmp.
export TMPDIR="$PWD/$BUILD/tmp"
# The few cases that cannot run in this build (an install of liblcm and a CMake build of the
# example against it, mpirun) skip themselves here (LCM_SKIP_UNDER_SANITIZER); every real-data
# pass runs.
export LCM_SANITIZED=1
rm -rf "$TMPDIR"
mkdir -p "$TMPDIR"

status=0
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" || status=$?
# A report in the output of a suite that still passed (e.g. in a child process whose exit code the
# test does not look at) fails the step too; ctest keeps every suite's output in LastTest.log.
log="$BUILD/Testing/Temporary/LastTest.log"
reports="$BUILD/sanitizer-reports.txt"
if grep -E -n "ERROR: (Address|Leak)Sanitizer|: runtime error: " "$log" >"$reports"; then
  echo "test_sanitize: sanitizer reports in $log:" >&2
  head -n 50 "$reports" >&2
  status=1
fi
rm -rf "$TMPDIR"
if [ "$status" -ne 0 ]; then
  echo "test_sanitize: FAILED" >&2
else
  echo "test_sanitize: all suites pass under ASan + UBSan, no sanitizer reports"
fi
exit "$status"
