#!/usr/bin/env bash
# CI stage for the x86 CPUs kiln had never met (after the release build), whatever CPU runs CI:
#  - under qemu-x86_64 -cpu Haswell (AVX2, FMA, F16C; no AVX-512, as on most laptops and every
#    Haswell-to-Comet-Lake machine): the kernel, runtime, C API and CLI suites, each kiln they
#    start under the same emulated CPU, and the shipped model's golden text;
#  - under a baseline x86-64 CPU (qemu64: SSE2 only, no AVX): the golden text on the portable table.
# qemu-user raises SIGILL for any instruction its CPU model lacks, so an AVX-512 instruction
# reached before the kernel table is chosen fails this stage.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(uname -m)" = x86_64 ] || { echo "cpus.sh: not an x86-64 machine; skipped"; exit 0; }
b=build/release
golden=tests/data/golden/stories260K_greedy200.txt
# Haswell less the features qemu's TCG lacks and would warn about on stderr (which the CLI tests
# read): PCID, x2APIC, TSC deadline, TSX, INVPCID; none is an instruction set kiln uses.
haswell="qemu-x86_64 -cpu Haswell,-pcid,-x2apic,-tsc-deadline,-hle,-invpcid,-rtm"

$haswell $b/kiln run --temp 0 -n 200 </dev/null 2>/dev/null | cmp - "$golden"
echo "cpus.sh: Haswell: the golden text"
# Which table ran, and why not a faster one (the emulated CPU lacks AVX-512).
$haswell $b/kiln bench -p 0 -n 4 -r 1 --bw-mib 16 --bw-passes 1 2>/dev/null | grep '^kernels  cpu: avx2 (not amx: .*not avx512: the CPU lacks avx512f'
# Two shards side by side (qemu is single-threaded). The two sweeps of every kernel over many
# shapes are left out here (3.8 minutes under qemu): they check the numbers of the avx2 and generic
# tables, which the release stage does natively on any x86 CI machine; what this stage adds is
# that nothing beyond AVX2 runs.
filter='Cpu*:Runtime*:CApi*:BenchCli*:ProfileCli*:ProfileCApi*:ChatCli*:CliSampling*:Golden*:Session*:ComputeProbe*'
filter+=':-CpuMatmul.EveryTableEverySchemeManyShapes:CpuMatmul.ModelShapes'
logs=$(mktemp -d)
for shard in 0 1; do
  GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$shard KILN_TEST_EMULATOR="$haswell" \
    $haswell $b/tests/kiln_tests --gtest_brief=1 --gtest_filter="$filter" >"$logs/$shard.log" 2>&1 &
done
failed=0
for job in $(jobs -p); do wait "$job" || failed=1; done
cat "$logs"/0.log "$logs"/1.log
rm -rf "$logs"
[ "$failed" -eq 0 ] || { echo "cpus.sh: a suite failed under $haswell"; exit 1; }
echo "cpus.sh: Haswell: kernel, runtime, C API and CLI suites passed"

# No AVX at all: the portable table, and the same text.
qemu-x86_64 -cpu qemu64 $b/kiln run --temp 0 -n 200 </dev/null 2>/dev/null | cmp - "$golden"
qemu-x86_64 -cpu qemu64 $b/kiln bench -p 0 -n 4 -r 1 --bw-mib 16 --bw-passes 1 2>/dev/null | grep '^kernels  cpu: generic (not amx: .*not avx2: the CPU lacks avx2,fma,f16c)'
echo "cpus.sh: x86-64 baseline (qemu64): the golden text on the portable table"
