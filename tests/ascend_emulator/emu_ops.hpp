#pragma once
// Ascend emulator: aclTensor/aclScalar/aclIntArray/aclOpExecutor, element
// access by dtype, strided N-d iteration, and the two-phase launch helpers used
// by the aclnn op implementations.

#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "emu_internal.hpp"

namespace msemu {

/// What an op needs of an aclTensor (copied when the executor is built).
struct TensorDesc {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;  // elements
  int64_t offset = 0;            // elements from data
  aclDataType dtype = ACL_DT_UNDEFINED;
  void* data = nullptr;          // device address
  const char* name = "tensor";   // argument name, for messages
};

/// A tensor resolved to host memory when the kernel is launched. Element
/// (i0, i1, ...) lives at start + (rel0 + sum(ik * strides[k])) * esize.
struct View {
  std::byte* start = nullptr;
  int64_t rel0 = 0;
  std::vector<int64_t> dims, strides;
  aclDataType dtype = ACL_DT_UNDEFINED;
  size_t esize = 0;
  std::byte* at(int64_t rel) const { return start + rel * static_cast<int64_t>(esize); }
};

/// The computation of an op; returns an aclError (recording a message on failure).
using Kernel = std::function<int(const std::vector<View>&)>;

}  // namespace msemu

struct aclTensor {
  msemu::TensorDesc desc;
  std::vector<int64_t> storage_dims;
  aclFormat format = ACL_FORMAT_ND;
};

struct aclScalar {
  aclDataType dtype = ACL_DT_UNDEFINED;
  double value = 0;
};

struct aclIntArray {
  std::vector<int64_t> values;
};

struct aclOpExecutor {
  std::string op;  // "aclnnAdd", ...
  std::vector<msemu::TensorDesc> tensors;
  std::shared_ptr<const msemu::Kernel> kernel;
};

namespace msemu {

// ---------------------------------------------------------------- dtypes
/// Bytes per element, or 0 for dtypes the emulator does not compute with.
MS_EMU_INTERNAL size_t dtype_size(aclDataType dt);
bool is_floating(aclDataType dt);
const char* dtype_name(aclDataType dt);
MS_EMU_INTERNAL double load(aclDataType dt, const std::byte* p);
MS_EMU_INTERNAL void store(aclDataType dt, std::byte* p, double v);

int64_t numel(const std::vector<int64_t>& dims);
std::string shape_str(const std::vector<int64_t>& dims);
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims);

// ---------------------------------------------------------------- handles
/// The tensor's description if `t` is a live aclTensor, else nullptr.
const TensorDesc* tensor_desc(const aclTensor* t);
bool scalar_live(const aclScalar* s);
bool int_array_live(const aclIntArray* a);

/// Validates a tensor argument of `fn` (non-null, live, supported dtype) and copies
/// its description, named `name`; returns an aclnn status (message recorded).
int get_tensor(const char* fn, const aclTensor* t, const char* name, TensorDesc& out);
/// Validates the workspaceSize/executor out-parameters.
int check_outputs(const char* fn, const uint64_t* workspaceSize, aclOpExecutor* const* executor);

// ---------------------------------------------------------------- two-phase launch
/// First checks of every aclnnXxxGetWorkspaceSize: context and injected faults.
int op_prologue(const char* fn);
/// Registers a new executor for `fn` over `tensors` and returns it through the out-params.
int make_executor(const char* fn, std::vector<TensorDesc> tensors, Kernel kernel,
                  uint64_t* workspaceSize, aclOpExecutor** executor);
/// The second phase: resolves the tensors, enqueues the kernel, consumes the executor.
int launch(const char* fn, void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
           aclrtStream stream);

// ---------------------------------------------------------------- iteration
/// Calls f(offsets) for every index of `dims` (row-major), where offsets[k]
/// starts at start[k] and advances by strides[k][d] along dimension d.
template <size_t N, class F>
void for_each_nd(const std::vector<int64_t>& dims, const std::array<std::vector<int64_t>, N>& strides,
                 std::array<int64_t, N> offs, F&& f) {
  const int64_t total = numel(dims);
  if (total == 0) return;
  const size_t rank = dims.size();
  std::vector<int64_t> idx(rank, 0);
  for (int64_t n = 0; n < total; ++n) {
    f(offs);
    for (size_t d = rank; d-- > 0;) {
      for (size_t k = 0; k < N; ++k) offs[k] += strides[k][d];
      if (++idx[d] < dims[d]) break;
      for (size_t k = 0; k < N; ++k) offs[k] -= strides[k][d] * dims[d];
      idx[d] = 0;
    }
  }
}

/// Strides for iterating `dims`/`strides` broadcast to `out_dims` (stride 0 on
/// broadcast dimensions, leading dimensions added). Assumes compatible shapes.
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& dims,
                                       const std::vector<int64_t>& strides,
                                       const std::vector<int64_t>& out_dims);

/// Broadcast shape of a and b (numpy rules); false when incompatible.
bool broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                     std::vector<int64_t>& out);
inline std::vector<int64_t> broadcast_strides(const View& v, const std::vector<int64_t>& out_dims) {
  return broadcast_strides(v.dims, v.strides, out_dims);
}

}  // namespace msemu
