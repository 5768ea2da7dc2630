#!/usr/bin/env bash
# The ARM64 libkiln_jni.so as an Android app would ship it (jniLibs/arm64-v8a/), checked with
# binutils and qemu-user:
# - every LOAD segment aligned to 16 KiB (Android 15's page size; -Wl,-z,max-page-size=16384);
# - no text relocations (Android refuses them from API 23);
# - NEEDED is the C library only (libc, libm, the dynamic loader): libstdc++ and libgcc are inside,
#   and so are PCRE2 and utf8proc. A glibc toolchain names them libc.so.6/libm.so.6/
#   ld-linux-aarch64.so.1 where the NDK links bionic's libc.so/libm.so/libdl.so: this proves that
#   nothing beyond the C library is needed, not that every C symbol it uses exists in bionic;
# - it exports JNI_OnLoad and Java_ai_kiln_* only;
# - under qemu-aarch64 (glibc's loader) it loads with every symbol resolved.
# Usage: check_arm64_library.sh LIBRARY
set -euo pipefail
so=$1
fail() { echo "check_arm64_library: $*"; exit 1; }
readelf=aarch64-linux-gnu-readelf
nm=aarch64-linux-gnu-nm
[ "$($readelf -hW "$so" | awk '/Machine:/ {print $2}')" = "AArch64" ] || fail "not an AArch64 ELF"
loads=$($readelf -lW "$so" | awk '$1 == "LOAD" {print $NF}')
[ -n "$loads" ] || fail "no LOAD segments"
for align in $loads; do
  [ $((align)) -ge 16384 ] || fail "a LOAD segment is aligned to $align, not 16 KiB"
done
! $readelf -dW "$so" | grep -q TEXTREL || fail "text relocations"
needed=$($readelf -dW "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
for lib in $needed; do
  case $lib in
    libc.so.6 | libm.so.6 | ld-linux-aarch64.so.1) ;;
    *) fail "needs $lib, which an Android device lacks" ;;
  esac
done
others=$($nm -D --defined-only "$so" | awk '{print $3}' | grep -v -e '^Java_ai_kiln_' -e '^JNI_OnLoad$' || true)
[ -z "$others" ] || fail "exports more than the JNI entry points: $(echo "$others" | head -3 | tr '\n' ' ')"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
aarch64-linux-gnu-gcc -std=c11 -Wall -Werror "$(dirname "$0")/native/dlopen_check.c" -ldl -o "$work/dlopen_check"
qemu-aarch64 -L /usr/aarch64-linux-gnu "$work/dlopen_check" "$so"
echo "check_arm64_library: LOAD aligned to $(echo $loads | tr ' ' ','), NEEDED: $needed; no text relocations"
