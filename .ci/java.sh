#!/usr/bin/env bash
# CI stage for the Java binding (after the release build): its tests again under -Xcheck:jni, the leak
# check (1,000 measured create/generate/close cycles, RSS flat within 5 MiB; 10,000 tokens on one
# worker thread), failing on any JNI warning; then the ARM64 libkiln_jni.so's checks.
set -euo pipefail
cd "$(dirname "$0")/.."
b=build/release
java_run() {
  java -Xcheck:jni -XX:+AlwaysPreTouch -Xms64m -Xmx64m -Dkiln.library=$b/bindings/java/libkiln_jni.so \
    -cp $b/bindings/java/kiln.jar:$b/bindings/java/kiln-tests.jar ai.kiln.test.JavaTests \
    --models models --data tests/data --kiln $b/kiln "$@"
}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for args in "" "--leak 1000"; do
  # shellcheck disable=SC2086
  java_run $args 2>&1 | tee "$log"
  grep -q '^[0-9]* passed, 0 failed$' "$log" || { echo "java.sh: Java tests failed"; exit 1; }
  # -Xcheck:jni reports misuse (a call with an exception pending, a local reference table over its
  # capacity) as WARNING lines; any is a failure.
  if grep -E '^WARNING|JNI' "$log" | grep -v '^PASS' | grep -q .; then
    echo "java.sh: -Xcheck:jni warned"
    exit 1
  fi
done
echo "java.sh: Java tests and leak check passed under -Xcheck:jni"
