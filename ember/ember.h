// ember: the umbrella header. Includes the public API of every layer:
// core (tensors, devices, allocator, generator, serialization), autograd (differentiable ops,
// engine, custom functions), nn (modules, layers, losses, optimizers), data (datasets,
// samplers, DataLoader) and parallel (DataParallel, distributed process groups, DDP).
#pragma once

#include "core/allocator.h"
#include "core/config.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/generator.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "core/serialization.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"

#include "nn/module.h"
