#pragma once
// The umbrella header: include this one file to use ms.
// Internal headers live in the subfolders; their layout may change.

#include "core/error.hpp"
#include "core/dtype.hpp"
#include "core/shape.hpp"
#include "core/allocator.hpp"
#include "core/storage.hpp"
#include "core/tensor.hpp"
#include "core/parallel.hpp"
#include "ops/registry.hpp"
#include "ops/dispatch.hpp"
#include "ops/elementwise.hpp"
#include "ops/unary.hpp"
#include "ops/binary.hpp"
#include "ops/views.hpp"
#include "ops/methods.hpp"
