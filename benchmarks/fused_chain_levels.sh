#!/usr/bin/env bash
# The fused 8-op chain (benchmarks/fused_chain.cpp) at every CPU level this machine runs:
# ms's interpreter (ms_fused) and generated code (ms_codegen) with MS_CPU_ISA=<level>,
# beside the Eigen peer compiled for the same level (fused_chain_eigen_<level>:
# -march=x86-64-v2 for sse4, -v3 for avx2, -v4 for avx512). Prints each program's
# `name value unit` lines, then `ratio <ours>_vs_eigen_<level>/n:N/threads:T X.XX`
# (medians of 3 repetitions; below 1: ours is faster). Targets: generated code <= 1.0 and
# the interpreter <= 1.2 at every level.
#
#   bash benchmarks/fused_chain_levels.sh [BUILD_DIR]   # default build/ (configured with the
#                                                     # benchmarks, as scripts/test.sh does)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
bin=$dir/bin
grep -m1 "model name" /proc/cpuinfo | sed 's/^/fused_chain_levels: CPU: /'
flags=$(grep -m1 "^flags" /proc/cpuinfo)
has() { for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
levels=()
has sse4_2 popcnt && levels+=(sse4)
has avx2 fma bmi2 && levels+=(avx2)
has avx512f avx512bw avx512dq avx512vl && levels+=(avx512)
echo "fused_chain_levels: levels this CPU runs: ${levels[*]}"
targets=(fused_chain)
for level in "${levels[@]}"; do targets+=("fused_chain_eigen_$level"); done
cmake --build "$dir" -j "${JOBS:-$(nproc)}" --target "${targets[@]}" > /dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
reps=(--benchmark_repetitions=3 --benchmark_report_aggregates_only=true)
for level in "${levels[@]}"; do
  MS_CPU_ISA=$level "$bin/fused_chain" --benchmark_filter='^ms_(fused|codegen)/' "${reps[@]}" > "$tmp/ms_$level.txt"
  "$bin/fused_chain_eigen_$level" "${reps[@]}" > "$tmp/eigen_$level.txt"
  # The `name value unit` lines (after the "# name value unit" header), tagged with the level.
  for f in ms eigen; do
    sed -n '/^# name value unit/,/^#/p' "$tmp/${f}_$level.txt" | grep -v '^#' | grep '/real_time ' |
      sed "s/^/$level /" | tee -a "$tmp/all.txt"
  done
done
awk '
  { split($2, p, "/"); key = $1 " " p[2] "/" p[3]; t[p[1] " " key] = $3 }
  END {
    for (k in t) {
      split(k, a, " ")
      if (a[1] == "eigen_array") continue
      e = t["eigen_array " a[2] " " a[3]]
      if (e > 0) printf "ratio %s_vs_eigen_%s/%s %.2f\n", (a[1] == "ms_fused" ? "interpreter" : "codegen"), a[2], a[3], t[k] / e
    }
  }' "$tmp/all.txt" | sort
