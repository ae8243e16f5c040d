#!/usr/bin/env bash
# What a user's build costs: the README's hello program built against an installed ms
# through find_package(ms), beside the same hello written with Eigen + fmt alone and, when
# installed, with LibTorch, compiled in the same run. Prints one `compile <name> <value>
# <unit>` line each:
#   compile kernels_once         ms::ms's kernel library (the ops' unit and the three x86-64
#                                level units), built once per build tree, with 2 jobs
#   compile hello_unit_O2 / _O0  one unit that includes <ms/ms.hpp> (kernels already built)
#   compile hello_unit_peak_rss  the compiler's peak memory for that unit at -O2
#   compile eigen_fmt_hello_O2, torch_hello_O2 (+ _peak_rss)   the peers
# Unit times are wall seconds of one compiler process (one core).
#
#   bash benchmarks/compile_time.sh
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
work=$(realpath -m "${COMPILE_BENCH_DIR:-build-compile-time}")
rm -rf "$work"
mkdir -p "$work/hello"
grep -m1 "model name" /proc/cpuinfo | sed 's/^/compile: CPU: /'
echo "compile: $(g++ --version | head -1)"

cmake -S "$src" -B "$work/ms" -DCMAKE_INSTALL_PREFIX="$work/prefix" -DMS_BUILD_TESTS=OFF -DMS_BUILD_EXAMPLES=OFF \
      -DMS_BUILD_BENCHMARKS=OFF -DMS_BUILD_TOOLS=OFF > "$work/ms.log"
cmake --install "$work/ms" >> "$work/ms.log"

cat > "$work/hello/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.24)
project(hello LANGUAGES CXX)
find_package(ms 0.1 CONFIG REQUIRED)
add_executable(hello main.cpp)
target_link_libraries(hello PRIVATE ms::ms)
CMAKE
cat > "$work/hello/main.cpp" <<'CPP'
#include <ms/ms.hpp>

int main() {
  auto a = ms::ones<float>({2, 3});
  auto b = a + a;
  fmt::print("{}\nsum = {}\n", b, b.sum().item());
}
CPP
cmake -S "$work/hello" -B "$work/hello-build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" \
      -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > "$work/hello.log"

t0=$(date +%s.%N)
cmake --build "$work/hello-build" -j 2 --target ms_kernels_archive >> "$work/hello.log"
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" 'BEGIN { printf "compile kernels_once %.1f s\n", b - a }'
cmake --build "$work/hello-build" -j 2 --target hello >> "$work/hello.log"
"$work/hello-build/hello" > /dev/null

# The hello unit's own compile command, rerun alone under /usr/bin/time.
cmd=$(python3 -c '
import json, sys
for e in json.load(open(sys.argv[1])):
    if e["file"].endswith("hello/main.cpp"):
        print(e["command"])' "$work/hello-build/compile_commands.json")
[ -n "$cmd" ] || { echo "compile: no compile command for main.cpp" >&2; exit 1; }
# measure NAME COMMAND...: prints the wall time and, for -O2, the peak RSS.
measure() {
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$work/time.txt" "$@" > /dev/null 2> "$work/$name.err" ||
    { cat "$work/$name.err" >&2; exit 1; }
  read -r secs kb < "$work/time.txt"
  echo "compile ${name} ${secs} s"
  echo "compile ${name}_peak_rss $((kb / 1024)) MB"
}
cd "$work/hello-build"
# shellcheck disable=SC2086
measure hello_unit_O2 ${cmd/ -O3/} -O2 -c -o "$work/h2.o"
# shellcheck disable=SC2086
measure hello_unit_O0 ${cmd/ -O3/} -O0 -c -o "$work/h0.o"

cat > "$work/eigen_fmt.cpp" <<'CPP'
#include <Eigen/Core>
#include <fmt/core.h>
int main() {
  Eigen::ArrayXXf a = Eigen::ArrayXXf::Ones(2, 3);
  Eigen::ArrayXXf b = a + a;
  fmt::print("sum = {}\n", b.sum());
}
CPP
measure eigen_fmt_hello_O2 g++ -std=c++20 -O2 -I/usr/include/eigen3 -c "$work/eigen_fmt.cpp" -o "$work/ef.o"
if [ -e /usr/include/torch/csrc/api/include/torch/torch.h ]; then
  cat > "$work/torch.cpp" <<'CPP'
#include <torch/torch.h>
#include <iostream>
int main() {
  auto a = torch::ones({2, 3});
  auto b = a + a;
  std::cout << b << "\nsum = " << b.sum().item<float>() << "\n";
}
CPP
  measure torch_hello_O2 g++ -std=c++17 -O2 -I/usr/include/torch/csrc/api/include -c "$work/torch.cpp" -o "$work/t.o"
else
  echo "compile: LibTorch not installed (libtorch-dev): no torch_hello line"
fi
