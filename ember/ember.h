// ember: the umbrella header. Includes the public API of every layer:
// core (tensors, devices, allocator, generator, serialization), autograd (differentiable ops,
// engine, custom functions), nn (modules, layers, RNNs over packed sequences, losses,
// optimizers), data (datasets, samplers, DataLoader) and parallel (DataParallel, process
// groups, DistributedDataParallel).
#pragma once

#include "core/allocator.h"
#include "core/config.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "core/serialization.h"
#include "core/tensor.h"
#include "core/tensor_index.h"
#include "core/thread_pool.h"

#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/indexing.h"
#include "autograd/inference_mode.h"
#include "autograd/ops.h"

#include "nn/activation.h"
#include "nn/checkpoint.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/init.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "nn/optim/adam.h"
#include "nn/optim/adamw.h"
#include "nn/optim/lr_scheduler.h"
#include "nn/optim/sgd.h"
#include "nn/rnn.h"
#include "nn/utils/clip_grad.h"
#include "nn/utils/rnn.h"

#include "data/data.h"

#include "parallel/comm.h"
#include "parallel/data_parallel.h"
#include "parallel/distributed/file_store.h"
#include "parallel/distributed/hash_store.h"
#include "parallel/distributed/init.h"
#include "parallel/distributed/prefix_store.h"
#include "parallel/distributed/process_group.h"
#include "parallel/distributed/tcp_store.h"
#include "parallel/distributed_data_parallel.h"
