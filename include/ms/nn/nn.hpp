#pragma once
// Umbrella for training: modules and layers (ms::nn), initialization (ms::nn::init),
// safetensors state files, optimizers and LR schedules (ms::optim), and the
// IDX / Fashion-MNIST reader and DataLoader (ms::data).

#include "module.hpp"
#include "init.hpp"
#include "layers.hpp"
#include "safetensors.hpp"
#include "models.hpp"
#include "../optim/optimizer.hpp"
#include "../data/idx.hpp"
#include "../data/loader.hpp"
