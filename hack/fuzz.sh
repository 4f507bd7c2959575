#!/usr/bin/env bash
# Runs every native Go fuzz target of the controller's packages (func FuzzX
# in internal/), one after the other, FUZZ_EXECS executions each (go test
# -fuzz runs one target of a package at a time). A failing input is written
# by go test to <package>/testdata/fuzz/<target>/ and kept there: commit it,
# and the normal `go test` runs it as a regression case from then on.
# Writes .cache/fuzz/result.json and a log per target.
#   FUZZ_EXECS   executions per target (default 150000)
#   FUZZ_TIME    instead, how long each target runs (a Go duration: 5m)
#   FUZZ_TARGETS space-separated target names to run (default: all)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
execs=${FUZZ_EXECS:-150000}
out="$root/.cache/fuzz"
mkdir -p "$out"
module=$(go list -m)
corpus=$(go env GOCACHE)/fuzz/$module

# Each target as "<package dir> <name>", from the test files.
mapfile -t targets < <(grep -Eo '^func Fuzz[A-Za-z0-9_]*\(' $(git ls-files 'internal/*_test.go') |
  sed -E 's#^(.*)/[^/]*:func (Fuzz[A-Za-z0-9_]*)\($#\1 \2#' | sort -u)
if [[ -n "${FUZZ_TARGETS:-}" ]]; then
  mapfile -t targets < <(printf '%s\n' "${targets[@]}" | grep -Ew "$(echo "$FUZZ_TARGETS" | tr ' ' '|')")
fi
fuzztime="${execs}x"
[[ -n "${FUZZ_TIME:-}" ]] && fuzztime=$FUZZ_TIME
echo ">> ${#targets[@]} fuzz targets, -fuzztime $fuzztime each"
echo ">> seed corpus and regression cases: <package>/testdata/fuzz/<target>/ (in git)"
echo ">> generated corpus: $corpus/<package>/<target>/ (Go's cache, kept between runs)"

failed=()
results=()
total=0
for t in "${targets[@]}"; do
  read -r dir name <<<"$t"
  log="$out/${dir//\//_}_$name.log"
  echo ">> $dir $name"
  start=$(date +%s)
  go test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" "./$dir" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  secs=$(( $(date +%s) - start ))
  n=$(grep -Eo 'execs: [0-9]+' "$log" | tail -1 | grep -Eo '[0-9]+' || echo 0)
  # The last progress line has the count when the run ended; a count
  # asked for is exactly what a successful run did.
  [[ $status -eq 0 && -z "${FUZZ_TIME:-}" ]] && n=$execs
  total=$(( total + n ))
  state=ok
  if [[ $status -ne 0 ]]; then
    state=FAIL
    failed+=("$dir $name")
    crasher=$(grep -Eo 'testdata/fuzz/[^ ]+' "$log" | tail -1)
    [[ -n "$crasher" ]] && echo ">> failing input kept in $dir/$crasher; rerun it with: go test -run '$name/${crasher##*/}' ./$dir"
  fi
  printf '>> %-34s %-6s %9s execs in %4ss\n' "$dir.$name" "$state" "$n" "$secs"
  results+=("{\"package\":\"$dir\",\"target\":\"$name\",\"result\":\"$state\",\"execs\":$n,\"seconds\":$secs}")
done
{ echo "{\"fuzztime\":\"$fuzztime\",\"totalExecs\":$total,\"go\":\"$(go env GOVERSION)\",\"targets\":["; (IFS=,; echo "${results[*]}"); echo "]}"; } >"$out/result.json"
echo ">> $total executions in total; results in ${out#$root/}/result.json"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo ">> FAILED: ${failed[*]}"
  exit 1
fi
