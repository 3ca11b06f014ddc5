// The dispatch stubs of the recurrent ops (core/ops/rnn.cpp; Note [Dispatch stubs]), with the
// contracts of native::rnn_layer_forward / _backward and cudnn_rnn_forward / _backward
// (core/ops/nn_native.h), arguments checked. Kernels of one layer: the CPU engine of
// core/kernels/cpu/rnn_layer.cpp; on CUDA the device-neutral stepwise engine
// (core/ops/rnn_stepwise.cpp) with the cell launchers of core/kernels/cuda/rnn_cell.cu
// (core/kernels/cuda/rnn_layer.cpp). The whole stack through cuDNN: CUDA only, built with cuDNN
// (core/kernels/cuda/cudnn_rnn.cpp); no other device has a kernel.
#pragma once
#include <vector>

#include "core/ops/detail/dispatch_stub.h"
#include "core/ops/nn_native.h"

namespace ember::native {

using RnnLayerForwardFn = RnnLayerForward(RnnMode mode, const Tensor& input, const PackedSteps& steps,
                                          const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights);
using RnnLayerBackwardFn = std::vector<Tensor>(RnnMode mode, const PackedSteps& steps, const Tensor& input,
                                               const std::vector<Tensor>& w_ih, const std::vector<Tensor>& w_hh,
                                               const std::vector<RnnDirectionSaved>& saved, const Tensor& d_output,
                                               const Tensor& d_h_n, const Tensor& d_c_n,
                                               const std::vector<bool>& needs);

using CudnnRnnForwardFn = CudnnRnnForward(const CudnnRnnConfig& c, const Tensor& input, const PackedSteps& steps,
                                          const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights,
                                          bool need_backward);
using CudnnRnnBackwardFn = CudnnRnnGrads(const CudnnRnnConfig& c, const CudnnRnnSaved& saved, const Tensor& input,
                                         const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights,
                                         const Tensor& output, const Tensor& d_output, const Tensor& d_h_n,
                                         const Tensor& d_c_n, bool need_weights);

extern detail::DispatchStub<RnnLayerForwardFn> rnn_layer_forward_stub;
extern detail::DispatchStub<RnnLayerBackwardFn> rnn_layer_backward_stub;
extern detail::DispatchStub<CudnnRnnForwardFn> cudnn_rnn_forward_stub;
extern detail::DispatchStub<CudnnRnnBackwardFn> cudnn_rnn_backward_stub;

}  // namespace ember::native
