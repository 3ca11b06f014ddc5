// The contract between core/ops/cudnn_rnn.cpp (device-neutral: tensors, allocation, caching,
// dropout state) and core/kernels/cuda/cudnn_rnn.cpp (the cuDNN 9 calls), in plain types so that
// neither side sees the other's headers. Every pointer is device memory of `device_index`
// unless said otherwise; every call runs on the calling thread's current stream of that device
// and returns without waiting. Thread-safe (each call builds its own descriptors).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/ops/detail/dispatch_stub.h"

namespace ember::native::detail {

/// What the cuDNN RNN descriptor is built from. mode is native::RnnMode as an int
/// (kRnnTanh, kRnnRelu, kLstm, kGru).
struct CudnnRnnDesc {
  int mode = 0;
  DType dtype = kFloat32;
  int device_index = 0;
  int64_t input_size = 0, hidden_size = 0, num_layers = 1;
  bool bidirectional = false, bias = true;
  /// Dropout between layers: p and the per-device state buffer (Note [cuDNN dropout state] in
  /// core/ops/cudnn_rnn.cpp). p == 0: no dropout, states may be null. init_states: the call
  /// (re)initializes the states from `seed` (cudnnSetDropoutDescriptor); otherwise it reuses
  /// them (cudnnRestoreDropoutDescriptor).
  double dropout = 0.0;
  void* dropout_states = nullptr;
  size_t dropout_states_bytes = 0;
  uint64_t dropout_seed = 0;
  bool init_states = false;
};

/// One forward or backward call over packed sequence-major data (cuDNN's
/// CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, which is ember's packed layout): batch sequences,
/// sorted by length (longest first), host_seq_lengths[b] their lengths (host memory),
/// dev_seq_lengths the same int32 values in device memory (filled by forward).
struct CudnnRnnCall {
  bool training = true;
  int64_t batch = 0, max_seq_length = 0;
  const int32_t* host_seq_lengths = nullptr;
  int32_t* dev_seq_lengths = nullptr;
  const void* x = nullptr;   // [N, input_size]
  void* y = nullptr;         // [N, D*H]
  const void* hx = nullptr;  // [L*D, B, H] (null: zeros)
  void* hy = nullptr;
  const void* cx = nullptr;  // LSTM
  void* cy = nullptr;
  const void* weight_space = nullptr;
  size_t weight_space_bytes = 0;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  void* reserve = nullptr;
  size_t reserve_bytes = 0;
  // backward only
  const void* dy = nullptr;
  void* dx = nullptr;
  const void* dhy = nullptr;  // null: zeros
  void* dhx = nullptr;
  const void* dcy = nullptr;
  void* dcx = nullptr;
  void* dweight_space = nullptr;  // accumulated into: zero it first
};

struct CudnnRnnBackend {
  /// Bytes of the dropout states of cuda:device_index (cudnnDropoutGetStatesSize).
  size_t (*dropout_states_bytes)(int device_index);
  /// Bytes of the weight space of `d` (cudnnGetRNNWeightSpaceSize).
  size_t (*weight_space_bytes)(const CudnnRnnDesc& d);
  /// Where each gate block of each ember parameter lies in a weight space at `weight_space`
  /// (cudnnGetRNNWeightParams), in elements, in native::rnn_gate_offsets' form and ember's
  /// parameter order (per layer and direction: w_ih, w_hh, then b_ih, b_hh when d.bias).
  std::vector<int64_t> (*gate_offsets)(const CudnnRnnDesc& d, const void* weight_space, size_t weight_space_bytes);
  /// Workspace and reserve-space bytes of a call (cudnnGetRNNTempSpaceSizes).
  void (*temp_space_bytes)(const CudnnRnnDesc& d, const CudnnRnnCall& c, size_t* workspace, size_t* reserve);
  /// Copies host_seq_lengths to dev_seq_lengths, then cudnnRNNForward.
  void (*forward)(const CudnnRnnDesc& d, const CudnnRnnCall& c);
  /// cudnnRNNBackwardData_v8, then cudnnRNNBackwardWeights_v8 (when dweight_space is set).
  void (*backward)(const CudnnRnnDesc& d, const CudnnRnnCall& c);
};

/// The cuDNN backend of a device type: a CUDA kernel only where ember was built with cuDNN
/// (core/kernels/cuda/cudnn_rnn.cpp); no kernel elsewhere (the stepwise RNN runs instead).
using CudnnRnnBackendFn = const CudnnRnnBackend*();
extern DispatchStub<CudnnRnnBackendFn> cudnn_rnn_backend_stub;

}  // namespace ember::native::detail
