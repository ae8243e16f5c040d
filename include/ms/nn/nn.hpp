#pragma once
// Umbrella for ms::nn: modules and layers, initialization (ms::nn::init), safetensors
// state files and the ready-made models. Optimizers (optim/) and data loading (data/) sit
// beside nn, not inside it: <ms/ms.hpp> includes all three.

#include "module.hpp"
#include "init.hpp"
#include "layers.hpp"
#include "safetensors.hpp"
#include "models.hpp"
