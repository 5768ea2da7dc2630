#!/usr/bin/env bash
# CI stage: the README's shell recipes marked `<!-- ci: recipe ... -->` (the C API's install and
# build, the Java example), each run exactly as printed, from the checkout's root, in a shell of
# its own; a recipe that fails, or prints nothing, fails the stage.
set -euo pipefail
cd "$(dirname "$0")/.."
n=0
while IFS= read -r -d '' block; do
  n=$((n + 1))
  echo "recipes.sh: recipe $n:"
  printf '%s\n' "$block" | sed 's/^/  | /'
  out=$(bash -euo pipefail -c "$block" 2>&1) || { printf '%s\n' "$out"; echo "recipes.sh: recipe $n failed"; exit 1; }
  [ -n "$out" ] || { echo "recipes.sh: recipe $n printed nothing"; exit 1; }
  printf '%s\n' "$out" | tail -n 3
done < <(awk '
  /^<!-- ci: recipe/ { want = 1; next }
  want && /^```sh$/ { inblock = 1; block = ""; next }
  inblock && /^```$/ { printf "%s%c", block, 0; inblock = 0; want = 0; next }
  inblock { block = block $0 "\n" }' README.md)
[ "$n" -ge 2 ] || { echo "recipes.sh: found $n recipes in README.md, expected the C API's and Java's"; exit 1; }
echo "recipes.sh: $n README recipes ran as printed"
