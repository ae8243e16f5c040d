#pragma once
// The ONNX umbrella header: import of ONNX models into ms graphs (onnx/import.hpp, with the
// op conversions of onnx/convert.hpp) and export of graphs and frozen models (onnx/export.hpp).
// Opt-in: <ms/ms.hpp> does not include it. Link the ms::onnx CMake target (Debian's libonnx and
// protobuf; it defines MS_HAVE_ONNX).

#include "ms.hpp"
#include "onnx/proto.hpp"
#include "onnx/convert.hpp"
#include "onnx/import.hpp"
#include "onnx/export.hpp"
