#!/usr/bin/env bash
# Trains a small classifier on Fashion-MNIST with ms: the training step is
# captured once as a graph and then replayed. Extra arguments go to the program.
#
#   bash scripts/demo.sh
#   bash scripts/demo.sh --ranks 2 [--model lenet]   # data-parallel on 2 processes (mpirun)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

# --ranks N: run N processes under mpirun (the example trains data-parallel with ms::dist).
ranks=1
rest=()
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks=${2:?--ranks needs a number}; shift 2 ;;
    --ranks=*) ranks=${1#--ranks=}; shift ;;
    *) rest+=("$1"); shift ;;
  esac
done
set -- ${rest[@]+"${rest[@]}"}

# Debian's dataset-fashion-mnist installs the four IDX .gz files here.
data_dir=/usr/share/datasets/fashion-mnist
if [ ! -f "$data_dir/train-images-idx3-ubyte.gz" ]; then
  found=$(dpkg -L dataset-fashion-mnist 2>/dev/null | grep 'train-images-idx3-ubyte' | head -n1 || true)
  [ -n "$found" ] && data_dir=$(dirname "$found")
fi
export MS_FASHION_MNIST_DIR="$data_dir"

if [ -f examples/fashion_mnist.cpp ]; then
  target=fashion_mnist
  args=("$data_dir" "$@")
elif [ -f examples/ms_demo.cpp ]; then
  target=ms_demo
  args=("$@")
else
  echo "demo.sh: neither examples/fashion_mnist.cpp nor examples/ms_demo.cpp exists yet" >&2
  exit 1
fi

# Its own build folder: build/ (scripts/test.sh) compiles the examples at -O0.
cmake -S . -B build-demo -DCMAKE_BUILD_TYPE=Release -DMS_BUILD_EXAMPLES=ON -DMS_EXAMPLES_OPT=-O2
cmake --build build-demo -j "${JOBS:-$(nproc)}" --target "$target"
echo "demo.sh: running $target (data: $data_dir)"
if [ "$ranks" -gt 1 ]; then
  # Open MPI refuses root and more processes than cores unless told; its shared-memory
  # single-copy mechanism (CMA) is not permitted in most containers.
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  echo "demo.sh: $ranks processes (mpirun -np $ranks)"
  exec mpirun -np "$ranks" --allow-run-as-root --oversubscribe "build-demo/bin/$target" "${args[@]}"
fi
exec "build-demo/bin/$target" "${args[@]}"
