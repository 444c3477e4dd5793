#!/usr/bin/env bash
# Runs every fuzz target of the module for a fixed budget each.
#
#   scripts/fuzz.sh                  every target, FUZZTIME (default 30s) each
#   FUZZTIME=2m scripts/fuzz.sh      a longer budget per target
#   scripts/fuzz.sh ./dispatch/...   only the targets of these packages
#
# The targets are found with `go test -list` in every package whose tests
# declare a `func Fuzz...`. Each target runs alone (`go test -fuzz` takes one
# target at a time) with `-run '^$'`, so the unit tests of the package do not
# run again. When a target fails, `go test` writes the failing input to
# testdata/fuzz/<Target>/ inside the package. This script leaves that file in
# place: from then on it is a regression test that every plain `go test` of
# the package runs, and it belongs in the commit that fixes the decoder. The
# script goes on with the other targets and exits non-zero at the end when any
# target failed, listing the inputs it kept.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-30s}
patterns=("$@")
[ ${#patterns[@]} -gt 0 ] || patterns=(./...)

# Packages whose test files declare a fuzz target. A cheap textual filter
# first, so that `go test -list` compiles only the packages that can have one.
mapfile -t pkgs < <(go list -e -f '{{.ImportPath}} {{.Dir}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}' "${patterns[@]}" |
	while read -r pkg dir files; do
		[ -n "$files" ] || continue
		for f in $files; do
			if grep -q '^func Fuzz[A-Z0-9_]' "$dir/$f"; then
				echo "$pkg $dir"
				break
			fi
		done
	done)

if [ ${#pkgs[@]} -eq 0 ]; then
	echo "fuzz: no fuzz targets found in ${patterns[*]}"
	exit 0
fi

failed=()
count=0
before=$(mktemp)
trap 'rm -f "$before"' EXIT
for entry in "${pkgs[@]}"; do
	pkg=${entry%% *}
	dir=${entry#* }
	mapfile -t targets < <(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true)
	for target in "${targets[@]}"; do
		count=$((count + 1))
		find "$dir/testdata/fuzz/$target" -type f 2>/dev/null | sort >"$before" || true
		echo "fuzz: $pkg $target for $fuzztime"
		if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"; then
			kept=$(find "$dir/testdata/fuzz/$target" -type f 2>/dev/null | sort | comm -13 "$before" - || true)
			failed+=("$pkg $target")
			if [ -n "$kept" ]; then
				echo "fuzz: $target failed; the failing input is kept as a regression test:"
				echo "$kept" | sed 's/^/fuzz:   /'
			else
				echo "fuzz: $target failed before fuzzing (its seed corpus or build fails)"
			fi
		fi
	done
done

echo "fuzz: ran $count targets for $fuzztime each"
if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz: ${#failed[@]} target(s) failed:"
	printf 'fuzz:   %s\n' "${failed[@]}"
	echo "fuzz: inputs under testdata/fuzz/ now run with every plain go test of their package;"
	echo "fuzz: fix the code and commit them with the fix."
	exit 1
fi
