#!/usr/bin/env bash
# Complexity held by CI (STYLE.md, "Plain Go, never compressed"). The production code is the root
# package's non-test .go files (bench/ and clients/ are tools around the server, not the server).
# It fails when a production function has a cognitive complexity over MAX_COGNIT (gocognit) or is
# over MAX_LINES lines long, counted from its `func` to its closing brace (.ci/funclen); it warns, and
# only warns, when the production Go lines pass WARN_LINES. It prints the 10 highest gocognit scores.
# gocognit comes from the Go module proxy, pinned, into a bin folder of its own outside the tree.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
GOCOGNIT_VERSION=v1.2.0
MAX_COGNIT=25
MAX_LINES=80
WARN_LINES=11000

bin=${XDG_CACHE_HOME:-$HOME/.cache}/rolodex-ci/gocognit-$GOCOGNIT_VERSION
if [ ! -x "$bin/gocognit" ]; then
	echo "Installing gocognit $GOCOGNIT_VERSION into $bin..."
	mkdir -p "$bin"
	GOBIN=$bin "$GO" install "github.com/uudashr/gocognit/cmd/gocognit@$GOCOGNIT_VERSION"
fi

files=()
for f in *.go; do
	case $f in
	*_test.go) ;;
	*) files+=("$f") ;;
	esac
done

echo "Cognitive complexity (gocognit $GOCOGNIT_VERSION), the 10 highest of the ${#files[@]} production files:"
"$bin/gocognit" -top 10 "${files[@]}"

failed=0
if ! over=$("$bin/gocognit" -over "$MAX_COGNIT" "${files[@]}"); then
	echo "FAIL: functions over a cognitive complexity of $MAX_COGNIT; split them where their parts have names:"
	echo "$over"
	failed=1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$GO" build -o "$tmp/funclen" .ci/funclen/main.go
status=0
long=$("$tmp/funclen" -max "$MAX_LINES" "${files[@]}") || status=$?
if [ "$status" -gt 1 ]; then
	exit "$status" # it could not parse a file, and said which
fi
if [ "$status" = 1 ]; then
	echo "FAIL: functions over $MAX_LINES lines; split them where their parts have names:"
	echo "$long"
	failed=1
fi

lines=$(cat "${files[@]}" | wc -l)
if [ "$lines" -gt "$WARN_LINES" ]; then
	echo "WARNING: $lines lines of production Go, over $WARN_LINES: is everything still needed?"
else
	echo "Production Go: $lines lines (a warning above $WARN_LINES)."
fi

if [ "$failed" != 0 ]; then
	exit 1
fi
echo "Complexity: no function over $MAX_COGNIT or over $MAX_LINES lines."
