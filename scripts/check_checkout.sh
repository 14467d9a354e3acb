#!/usr/bin/env bash
# Tests never write into the checkout (they use temporary folders): this checks it.
#   check_checkout.sh mark MARK              records the time (MARK: a file outside the checkout
#                                            or in a build folder)
#   check_checkout.sh check MARK [SKIP ...]  exits 1, listing them, when files or links of the
#                                            checkout were created or changed after `mark`
# Not looked at: .git, the top-level build*/ folders, MARK's folder and every SKIP folder (build
# folders with other names). CTest runs it as the fixture checkout_mark / checkout_untouched
# around every suite; scripts/test.sh runs it around all of its steps.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=$1
mark=$2
shift 2
case "$mode" in
  mark)
    mkdir -p "$(dirname "$mark")"
    touch "$mark"
    ;;
  check)
    [[ -f "$mark" ]] || { echo "check_checkout: no mark $mark (run 'mark' first)" >&2; exit 2; }
    root=$(realpath .)
    prune=(-path "$root/.git" -o -path "$root/build*" -o -path "$(dirname "$(realpath "$mark")")")
    for d in "$@"; do prune+=(-o -path "$(realpath "$d")"); done
    changed=$(find "$root" \( "${prune[@]}" \) -prune -o ! -type d -newer "$mark" -print)
    if [[ -n "$changed" ]]; then
      echo "check_checkout: the tests wrote into the checkout $root (use a temporary folder):" >&2
      head -n 50 <<<"$changed" >&2
      exit 1
    fi
    echo "check_checkout: the checkout is as it was"
    ;;
  *)
    echo "usage: check_checkout.sh mark MARK | check MARK [SKIP ...]" >&2
    exit 2
    ;;
esac
