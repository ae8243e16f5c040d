#!/usr/bin/env bash
# isa_level.sh LEVEL TEST_BINARY TAGS: runs the tests with the tags under MS_CPU_ISA=LEVEL,
# or exits 77 (skipped) when this CPU cannot run that level.
set -euo pipefail
level=$1 bin=$2 tags=$3
case "$level" in
  baseline) need="" ;;
  sse4) need="sse4_2" ;;
  avx2) need="avx2" ;;
  avx512) need="avx512bw" ;;
  *) echo "isa_level.sh: unknown level $level" >&2; exit 2 ;;
esac
if [ -n "$need" ] && ! grep -qw "$need" /proc/cpuinfo; then
  echo "isa_level.sh: this CPU has no $need; the $level kernels are not tested here"
  exit 77
fi
exec "$bin" "$tags" --warn NoTests
