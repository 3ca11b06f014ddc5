// The CUDA kernels of the recurrent stubs (core/ops/rnn_stubs.h), declared by the stubs' own
// signatures: one layer in rnn_layer.cpp; the cuDNN stack in cudnn_rnn.cpp (built with cuDNN only).
#pragma once
#include "core/ops/rnn_stubs.h"

namespace ember::cuda {

native::RnnLayerForwardFn rnn_layer_forward;
native::RnnLayerBackwardFn rnn_layer_backward;
native::CudnnRnnForwardFn cudnn_rnn_forward;
native::CudnnRnnBackwardFn cudnn_rnn_backward;

}  // namespace ember::cuda
