#!/usr/bin/env bash
# Installs the Debian 12 packages that ms needs to build, test and run its demo.
# Idempotent: when everything is installed already it changes nothing.
#
#   bash scripts/setup.sh           # build, tests, examples, tools
#   bash scripts/setup.sh --bench   # also LibTorch, the benchmarks' peer
#   bash scripts/setup.sh --fuzz    # also clang and its libFuzzer runtime (scripts/fuzz.sh)
set -euo pipefail

packages=(cmake g++ make ninja-build libeigen3-dev libxsimd-dev libfmt-dev catch2
          nlohmann-json3-dev libbenchmark-dev zlib1g-dev
          dataset-fashion-mnist python3-numpy graphviz libopenblas-openmp-dev libdnnl-dev
          libopenmpi-dev openmpi-bin libcli11-dev
          libonnx-dev libprotobuf-dev libonnx-testdata
          qemu-user binutils)  # the packaging test runs a program on emulated older CPUs

for arg in "$@"; do
  case "$arg" in
    --bench) packages+=(libtorch-dev) ;;
    --fuzz) packages+=(clang libclang-rt-14-dev) ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  if ! dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages are installed"
  exit 0
fi

echo "setup: missing packages: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: run as root, or install them with:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${missing[@]}"
echo "setup: installed ${missing[*]}"
