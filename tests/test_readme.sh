#!/usr/bin/env bash
# The README's quick start, run as a test (CTest entry test_readme): every command of the fenced
# sh blocks before README.md's first "## " heading, then a check that every runs/... path that
# part of the README names exists. It runs outside the checkout (the checkout gains no file):
#   - `bash scripts/run_default.sh` runs from the repository with LCM_RUN_DIR=<tmp>/repo/runs/default
#     (its outputs land where the README's runs/default/ stands for); it rebuilds build/ when that
#     is out of date, so it runs only when this build folder is the README's build/ and not under
#     the sanitizer (the sanitizer step's folder is build-san);
#   - `bash scripts/test.sh` is not run: it is the command that runs this test;
#   - every other command runs in <tmp>/repo, a working folder with build/, configs/ and tests/
#     linking to this build and checkout and <tmp>/shared/data/looperset-sample holding the real
#     sample (../shared/data, when there and not under the sanitizer) or lcm-synth stand-ins
#     (docs/synth.md), so that the README's ../shared/... paths resolve in every clone; lcm-train
#     gets training.max_epochs=1 appended (the commands and paths are under test, not accuracy).
# Prints a doctest-like "TEST CASE:" / "MESSAGE: skipped: ..." pair for each part it skips
# (scripts/test_summary.sh counts them) and exits non-zero on the first failing command or
# missing path.
#   test_readme.sh SOURCE_DIR BINARY_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
bin=$(cd "$2" && pwd)
readme="$src/README.md"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lcm_test_readme_XXXXXX")
trap 'rm -rf "$tmp"' EXIT
work="$tmp/repo"
mkdir -p "$work" "$tmp/shared/data/looperset-sample"
ln -s "$bin" "$work/build"
ln -s "$src/configs" "$work/configs"
ln -s "$src/tests" "$work/tests"
sanitized=0
[[ "${LCM_SANITIZED:-0}" == "1" ]] && sanitized=1
export OMP_WAIT_POLICY=passive

skip() {  # skip <part> <why>
  echo "TEST CASE:  README quick start: $1"
  echo "MESSAGE: skipped: $2"
}

real="$src/../shared/data/looperset-sample"
[[ -n "${LCM_SHARED_DATA:-}" ]] && real="$LCM_SHARED_DATA/looperset-sample"
for split in train valid; do
  if [[ $sanitized == 0 && -f "$real/$split.jsonl.gz" ]]; then
    ln -s "$(cd "$real" && pwd)/$split.jsonl.gz" "$tmp/shared/data/looperset-sample/"
  else
    seed=1
    [[ $split == valid ]] && seed=2
    "$bin/bin/lcm-synth" --programs 40 --schedules-per-program 12 --seed "$seed" \
      --out "$tmp/shared/data/looperset-sample/$split.jsonl.gz" >/dev/null
  fi
done

# The quick start: the lines of the fenced sh blocks before the first "## " heading, with "\"
# continuations joined and comments dropped.
quick=$(awk '/^## /{exit} {print}' "$readme")
mapfile -t commands < <(awk '
  /^```sh/ {inblock = 1; next}
  /^```/ {inblock = 0; next}
  inblock {
    line = $0; sub(/[ \t]+#.*$/, "", line)
    if (line ~ /\\$/) { sub(/\\$/, "", line); acc = acc line; next }
    acc = acc line
    if (acc ~ /[^ \t]/) print acc
    acc = ""
  }' <<<"$quick")
((${#commands[@]} >= 2)) || { echo "test_readme: found ${#commands[@]} quick-start commands in $readme" >&2; exit 1; }

ran=0
for cmd in "${commands[@]}"; do
  cmd=$(sed -E 's/^[[:space:]]+//; s/[[:space:]]+/ /g; s/ $//' <<<"$cmd")
  echo "test_readme: \$ $cmd"
  t0=$SECONDS
  case "$cmd" in
    "bash scripts/test.sh"*)
      echo "test_readme: not run: scripts/test.sh is the command that runs this test"
      continue
      ;;
    "bash scripts/run_default.sh"*)
      if [[ $sanitized == 1 ]]; then
        skip "$cmd" "it builds and runs build/, not this sanitizer build"
        continue
      fi
      if [[ "$bin" != "$src/build" ]]; then
        skip "$cmd" "it builds and runs $src/build, and this build is $bin"
        continue
      fi
      (cd "$src" && LCM_RUN_DIR="$work/runs/default" bash -c "$cmd")
      ;;
    "build/bin/lcm-train "*)
      (cd "$work" && bash -c "$cmd training.max_epochs=1")
      ;;
    *)
      (cd "$work" && bash -c "$cmd")
      ;;
  esac
  ran=$((ran + 1))
  echo "test_readme: ok ($((SECONDS - t0)) s)"
done
((ran >= 2)) || { echo "test_readme: only $ran quick-start commands ran" >&2; exit 1; }

# Every runs/... file or folder the quick start names exists after its commands; the main job's
# outputs only where run_default.sh ran.
mapfile -t paths < <(grep -oE 'runs/[A-Za-z0-9_./-]*[A-Za-z0-9_/]' <<<"$quick" | sort -u)
((${#paths[@]} >= 2)) || { echo "test_readme: the quick start names ${#paths[@]} runs/ paths" >&2; exit 1; }
missing=0
for p in "${paths[@]}"; do
  if [[ "$p" == runs/default* && ! -d "$work/runs/default" ]]; then
    echo "test_readme: $p not checked (run_default.sh did not run here)"
    continue
  fi
  if compgen -G "$work/$p*" >/dev/null; then
    echo "test_readme: $p exists"
  else
    echo "test_readme: README.md names $p, which its quick start did not write" >&2
    missing=1
  fi
done
exit "$missing"
