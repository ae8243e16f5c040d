#pragma once
// Neural-network ops on NCHW tensors (category nn, float32 and float64): this header only
// gathers them. Each op family lives in one file of ops/nn/, which holds its ops'
// declarations, kernels, registrations and API together (in that order):
//   nn/common.hpp     Int2 and the helpers the families share (attribute readers, costs,
//                     the float-only kernel visitor)
//   nn/conv.hpp       conv2d, conv2d_grad_input, conv2d_grad_weight; im2col and col2im,
//                     the oneDNN convolution path
//   nn/pool.hpp       max_pool2d (and _with_indices), avg_pool2d, adaptive_avg_pool2d and
//                     their _grad ops
//   nn/norm.hpp       batch_norm, layer_norm and their _grad ops
//   nn/dropout.hpp    dropout, dropout_with_mask
//   nn/embedding.hpp  embedding
//   nn/loss.hpp       cross_entropy, nll_loss (and their _grad ops), mse_loss
//   nn/conv_transpose.hpp  conv_transpose2d (GEMM + col2im, or oneDNN's backward-data)
//   nn/resize.hpp     interpolate (nearest, bilinear) and interpolate_grad
// The gradient table rows live in autograd/nn_rules.hpp. Kernels never dispatch. The
// families are included in the order their ops have always been registered in (ms-op list
// shows it).

#include "nn/common.hpp"
#include "nn/conv.hpp"
#include "nn/pool.hpp"
#include "nn/norm.hpp"
#include "nn/dropout.hpp"
#include "nn/embedding.hpp"
#include "nn/loss.hpp"
#include "nn/conv_transpose.hpp"
#include "nn/resize.hpp"
