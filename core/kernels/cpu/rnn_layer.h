// The CPU engine of one recurrent layer (both directions when bidirectional) over packed rows:
// the input GEMM, per step the recurrent GEMM (PackedRhs or BLAS) and the fused cell kernel,
// and the backward in reverse step order. Run by native::rnn_layer_forward / _backward
// (core/ops/rnn.cpp) through their stubs, after the arguments are checked. See Note [RNN step
// buffers] in rnn_layer.cpp.
#pragma once
#include "core/ops/rnn_stubs.h"

namespace ember::kernels::cpu {

/// The kernels of rnn_layer_forward_stub / rnn_layer_backward_stub, declared by their signatures.
native::RnnLayerForwardFn rnn_layer_forward;
native::RnnLayerBackwardFn rnn_layer_backward;

}  // namespace ember::kernels::cpu
