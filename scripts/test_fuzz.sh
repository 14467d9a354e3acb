#!/usr/bin/env bash
# The libFuzzer targets of fuzz/ as one deterministic CI step (docs/fuzzing.md): configures and
# builds build-fuzz with Clang (LCM_FUZZ=ON: coverage instrumentation + ASan + UBSan, no CUDA;
# LCM_WERROR=ON: a Clang warning in lcm's code fails the build),
# then runs each target with a fixed seed and a fixed number of inputs over its committed seeds
# (fuzz/corpus/<target>) and regression inputs (fuzz/regressions/<target>). Exits non-zero when a
# build fails or any input crashes, hangs, leaks, exhausts memory or trips a sanitizer; the input
# is then saved as <build>/findings/<target>-crash-<sha1> (its stack trace is in the output).
# New inputs the run finds go to a temp folder in the build folder, never into fuzz/corpus.
#   LCM_JOBS              parallel build jobs (default: nproc)
#   LCM_FUZZ_BUILD        build folder (default: build-fuzz)
#   LCM_FUZZ_RUNS_RECORD  inputs run by fuzz_record (default 2500: 30-45 s on 2 cores)
#   LCM_FUZZ_RUNS_FILES   inputs run by fuzz_files (default 30000: 10-30 s on 2 cores)
#   LCM_FUZZ_SEED         libFuzzer's -seed (default 1: the same inputs on every run)
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${LCM_JOBS:-$(nproc)}
BUILD=${LCM_FUZZ_BUILD:-build-fuzz}
SEED=${LCM_FUZZ_SEED:-1}
command -v clang++ >/dev/null || { echo "test_fuzz: clang++ not found (scripts/setup.sh installs it)" >&2; exit 1; }

CXX=clang++ cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLCM_FUZZ=ON -DLCM_CUDA=OFF \
  -DLCM_CUDA_EMULATE=OFF -DLCM_SANITIZE=OFF -DLCM_BUILD_TESTS=OFF -DLCM_BUILD_BENCH=OFF \
  -DLCM_WERROR=ON >/dev/null
t0=$SECONDS
cmake --build "$BUILD" -j "$JOBS" --target fuzz_record fuzz_files
echo "test_fuzz: build $((SECONDS - t0)) s"

# The targets write each input to a file under TMPDIR (their loaders read paths); a crashing input
# skips the clean-up at exit, so its leftovers stay in the build folder, not in the shared /tmp.
export TMPDIR="$PWD/$BUILD/tmp"
rm -rf "$TMPDIR" "$BUILD/findings"
mkdir -p "$TMPDIR" "$BUILD/findings"
export ASAN_OPTIONS="detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export OMP_WAIT_POLICY=passive

# Reproducible runs: -seed fixes libFuzzer's mutations, -reload=0 keeps it from re-reading its
# output folder at times that depend on the clock, and without address-space randomisation the
# pointer values that its comparison tracing records are the same on every run (setarch -R; where
# the container refuses it, the runs still pass or fail alike, they only keep other inputs).
norandom=()
if setarch "$(uname -m)" -R true 2>/dev/null; then norandom=(setarch "$(uname -m)" -R); fi

status=0
# fuzz <target> <runs> <max_len>: max_len lets inputs grow to the largest real record (a LOOPerSet
# line runs to about 1 MB) or the largest seed file.
fuzz() {
  local target=$1 runs=$2 max_len=$3
  local dirs=("fuzz/corpus/$target")
  [[ -d "fuzz/regressions/$target" ]] && dirs+=("fuzz/regressions/$target")
  local out log t1=$SECONDS rc=0
  out=$(mktemp -d "$TMPDIR/$target-new-XXXXXX")
  log="$BUILD/$target.log"
  "${norandom[@]}" "$BUILD/bin/$target" -seed="$SEED" -runs="$runs" -reload=0 \
    -max_len="$max_len" -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$BUILD/findings/$target-" "$out" "${dirs[@]}" >"$log" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]]; then
    # The report's first lines and first 30 frames (a stack overflow repeats one frame
    # thousands of times), then its summary and where the input went; all of it is in $log.
    echo "test_fuzz: $target FAILED (exit $rc) after $((SECONDS - t1)) s (full output: $log):" >&2
    grep -m1 -A32 -E "ERROR: |runtime error: |^$target: " "$log" >&2 || tail -n 40 "$log" >&2
    echo "test_fuzz: its first frames in lcm's code:" >&2
    grep -m8 -E "#[0-9]+ .* in (lcm::|LLVMFuzzerTestOneInput)" "$log" | cut -c1-240 >&2 || true
    grep -E "^SUMMARY: |Test unit written to" "$log" >&2 || true
    status=1
  else
    local done_line
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1)
    echo "test_fuzz: $target: $runs inputs in $((SECONDS - t1)) s, no finding: ${done_line:-?}"
  fi
  rm -rf "$out"
}
fuzz fuzz_record "${LCM_FUZZ_RUNS_RECORD:-2500}" 1200000
fuzz fuzz_files "${LCM_FUZZ_RUNS_FILES:-30000}" 200000
rm -rf "$TMPDIR"
if [[ $status -ne 0 ]]; then
  echo "test_fuzz: FAILED (reproduce: $BUILD/bin/<target> <input>; docs/fuzzing.md)" >&2
fi
exit "$status"
