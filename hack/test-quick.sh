#!/usr/bin/env bash
# make test-quick: the inner loop. The unit tests of every package that
# needs no local environment (-short: packages that start one skip their
# integration tests), then each fuzz target of the planner for
# QUICK_FUZZ_TIME (default 5s). Not a substitute for make test.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${QUICK_FUZZ_TIME:-5s}
# test/ holds the integration suites, dev/localenv and dev/bench start
# processes and servers.
mapfile -t pkgs < <(go list ./... | grep -Ev '/(test|dev/localenv|dev/bench)(/|$)')
go test -short -count=1 "${pkgs[@]}"
mapfile -t targets < <(grep -Eo '^func Fuzz[A-Za-z0-9_]*\(' internal/planner/*_test.go internal/planner/*/*_test.go |
  sed -E 's#^(.*)/[^/]*:func (Fuzz[A-Za-z0-9_]*)\($#\1 \2#' | sort -u)
for t in "${targets[@]}"; do
  read -r dir name <<<"$t"
  echo ">> fuzz $name ($dir) for $fuzztime"
  if ! out=$(go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "./$dir" 2>&1); then
    # go test kept the failing input under ./$dir/testdata/fuzz/$name/:
    # commit it, and plain go test runs it from then on.
    printf '%s\n' "$out"
    exit 1
  fi
done
echo ">> test-quick: unit tests and ${#targets[@]} planner fuzz targets passed"
