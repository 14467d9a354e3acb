#!/usr/bin/env bash
# Counts the doctest test cases of one or more ctest runs from their logs
# (<build>/Testing/Temporary/LastTest.log) and prints, per log, the skipped test cases with why,
# then one line per log, then the closing line over all of them:
#   tests: <passed> passed, <failed> failed, <skipped> skipped
# A test case is skipped when it logged a doctest MESSAGE starting with "skipped" (what
# LCM_REQUIRE_SHARED, LCM_SKIP_UNDER_SANITIZER and lcm::test::skipped_without_cuda do) and
# returned; it then counts as skipped, not passed. A suite that ended without doctest's summary
# line (a crash, a timeout, a sanitizer abort) counts as one failed test case.
#   test_summary.sh LABEL=LOG [LABEL=LOG ...]      e.g. test=build/Testing/Temporary/LastTest.log
# LCM_FAILED_STEP=<name> (scripts/test.sh, when a step failed): a step that failed outside the test
# cases (a build, the fuzz targets, the checkout check) counts as one failed test when no test
# case failed, so that the closing line never reads "0 failed" for a failed run.
set -uo pipefail
total_p=0 total_f=0 total_s=0
lines=()
for arg in "$@"; do
  label=${arg%%=*}
  log=${arg#*=}
  if [[ ! -f "$log" ]]; then
    lines+=("$label: no ctest log at $log (the step did not run its suites)")
    continue
  fi
  # awk prints the skip list, then "COUNTS <passed> <failed> <skipped>" as its last line.
  out=$(awk -v label="$label" '
    # A suite without doctest summary (a script test, a crash, a timeout): the verdict of ctest.
    function end_suite(verdict) {
      if (suite == "") return
      if (!seen_summary) {
        if (verdict ~ /Passed/) passed += 1
        else if (verdict ~ /Skipped|Not Run/) {
          nskip += 1; list[nskip] = "  " suite " -- skipped by ctest: " verdict
        } else { failed += 1; crashed = crashed " " suite }
      }
      suite = ""
    }
    /^[0-9]+\/[0-9]+ Test: / {
      end_suite("Failed"); suite = $3; seen_summary = 0; tc = ""; in_output = 0; next
    }
    suite == "" { next }
    # only the output of the suite counts (the Command: line may hold any text)
    /^Output:$/ { in_output = 1; next }
    /^<end of output>$/ { in_output = 0; next }
    !in_output && /^Test [A-Z][a-z]+( [A-Za-z]+)*\.$/ { end_suite($0); next }
    !in_output { next }
    /^TEST CASE:  / { tc = substr($0, 13); next }
    /MESSAGE: [Ss]kipped/ {
      key = suite SUBSEP tc
      if (!(key in skip)) {
        skip[key] = 1; nskip += 1
        why = $0; sub(/^.*MESSAGE: /, "", why)
        list[nskip] = "  " suite ": " tc " -- " why
      }
      next
    }
    /^\[doctest\] test cases:/ {
      # [doctest] test cases: 12 | 11 passed | 1 failed | 0 skipped
      split($0, f, "|")
      p = f[2]; gsub(/[^0-9]/, "", p)
      q = f[3]; gsub(/[^0-9]/, "", q)
      passed += p; failed += q; seen_summary = 1
      next
    }
    END {
      end_suite("Failed")
      if (nskip > 0) {
        print label ": skipped test cases (" nskip "):"
        for (i = 1; i <= nskip; i++) print list[i]
      }
      if (crashed != "") print label ": suites that failed without a doctest summary (crash, timeout, script):" crashed
      print "COUNTS " passed - nskip " " failed + 0 " " nskip + 0
    }' "$log")
  counts=$(tail -n 1 <<<"$out")
  body=$(sed '$d' <<<"$out")
  [[ -n "$body" ]] && echo "$body"
  read -r _ p f s <<<"$counts"
  lines+=("$label: $p passed, $f failed, $s skipped")
  total_p=$((total_p + p)) total_f=$((total_f + f)) total_s=$((total_s + s))
done
if [[ -n "${LCM_FAILED_STEP:-}" && $total_f -eq 0 ]]; then
  lines+=("step $LCM_FAILED_STEP failed outside the test cases: counted as 1 failed")
  total_f=1
fi
((${#lines[@]})) && for l in "${lines[@]}"; do echo "  $l"; done
echo "tests: $total_p passed, $total_f failed, $total_s skipped"
