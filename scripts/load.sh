#!/usr/bin/env bash
# load.sh: run Go tests on a busy machine, where timing bugs show.
#
#   scripts/load.sh [-n RUNS] [-b BURNERS] [-d DURATION] [-l LOG] PKG [TEST_REGEXP] [-- GO_TEST_FLAGS…]
#
# Starts BURNERS CPU burners (busy loops, default one per core as `nproc`
# counts them), then runs
#
#   go test -count RUNS -failfast -v -timeout DURATION -run TEST_REGEXP GO_TEST_FLAGS… PKG
#
# so the tests run RUNS times in a row, each time next to burners that take
# every core, and stop at the first failure. The burners are stopped when
# the script ends, however it ends. The whole output goes to LOG (default
# load-<time>.log in the current directory); the script prints, per
# top-level test, how many runs passed and failed, the load average at the
# start and the end, and exits with go test's status.
#
# Examples:
#   scripts/load.sh -n 200 ./service '^TestServiceTakesTurnsUpToTheTurnLimit$' -- -race
#   scripts/load.sh -n 3 ./...                 # the whole suite, three times, under load
#   scripts/load.sh -n 200 -b 0 ./toolkit '^TestPatternSchemaConcurrent$'   # no burners
#
# Defaults: RUNS 200, BURNERS $(nproc), DURATION 2h (go test's -timeout:
# the longest the whole command may take), TEST_REGEXP "." (every test).
set -euo pipefail

runs=200
burners="$(nproc)"
duration=2h
log=""
while getopts "n:b:d:l:h" opt; do
  case "$opt" in
  n) runs="$OPTARG" ;;
  b) burners="$OPTARG" ;;
  d) duration="$OPTARG" ;;
  l) log="$OPTARG" ;;
  *)
    sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
  esac
done
shift $((OPTIND - 1))
pkg="${1:-}"
if [[ -z "$pkg" ]]; then
  echo "usage: $0 [-n RUNS] [-b BURNERS] [-d DURATION] [-l LOG] PKG [TEST_REGEXP] [-- GO_TEST_FLAGS…]" >&2
  exit 2
fi
shift
pattern="."
if [[ $# -gt 0 && "$1" != "--" ]]; then
  pattern="$1"
  shift
fi
if [[ "${1:-}" == "--" ]]; then shift; fi
[[ -n "$log" ]] || log="load-$(date +%Y%m%d-%H%M%S).log"

pids=()
stop_burners() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap stop_burners EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for ((i = 0; i < burners; i++)); do
  # A subshell spinning on a builtin: one core's worth of work, no I/O.
  (trap - INT TERM; while :; do :; done) &
  pids+=("$!")
done

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s)
echo "load.sh: $burners burners, go test -count $runs -run '$pattern' $* $pkg; log $log" >&2
status=0
go test -count "$runs" -failfast -v -timeout "$duration" -run "$pattern" "$@" "$pkg" >"$log" 2>&1 || status=$?
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
stop_burners

echo "load.sh: $(( $(date +%s) - start )) s, load average $load_before at the start, $load_after at the end, go test exit $status"
# Top-level results only: subtests are indented.
awk '/^--- (PASS|FAIL): /{ n[$3" "$2]++ } END { for (k in n) { split(k, a, " "); sub(":", "", a[2]); print "  " a[1] ": " n[k] " " tolower(a[2]) } }' "$log" | sort
if [[ $status -ne 0 ]]; then
  echo "load.sh: first failure:"
  grep -n -m 20 -E '^(--- FAIL|FAIL|panic:)|^\s+--- FAIL' "$log" | head -20 || true
fi
exit "$status"
