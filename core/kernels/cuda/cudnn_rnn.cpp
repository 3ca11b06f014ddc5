// The cuDNN 9 RNN calls behind native::detail::CudnnRnnBackend (contract:
// core/ops/detail/cudnn_rnn_plan.h): descriptors built per call from CudnnRnnDesc (host-side
// work only), cudnnRNNForward, cudnnRNNBackwardData_v8 / cudnnRNNBackwardWeights_v8 over packed
// sequence-major data, the weight-space layout query. Memory (weights, workspace, reserve,
// dropout states) is the caller's, from the caching allocator. Thread-safe.
#include <cstring>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_device.h"
#include "core/cuda/cuda_stream.h"
#include "core/cuda/cudnn_check.h"
#include "core/error.h"
#include "core/kernels/cuda/kernels.h"
#include "core/ops/detail/cudnn_rnn_plan.h"
#include "core/pinned_memory.h"
#include "core/stream.h"

namespace ember::cuda {
namespace {

using native::detail::CudnnRnnBackend;
using native::detail::CudnnRnnCall;
using native::detail::CudnnRnnDesc;

// Owner of a cuDNN descriptor (destroyed at scope exit; a failed destroy is ignored there).
template <typename Handle, cudnnStatus_t (*Create)(Handle*), cudnnStatus_t (*Destroy)(Handle)>
struct Desc {
  Handle d = nullptr;
  Desc() { EMBER_CUDNN_CHECK(Create(&d)); }
  ~Desc() { (void)Destroy(d); }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
};
using TensorDesc = Desc<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using DataDesc = Desc<cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor, cudnnDestroyRNNDataDescriptor>;
using DropoutDesc = Desc<cudnnDropoutDescriptor_t, cudnnCreateDropoutDescriptor, cudnnDestroyDropoutDescriptor>;
using RnnDesc = Desc<cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor>;

cudnnDataType_t data_type(DType dt) {
  EMBER_CHECK_T(TypeError, dt == kFloat32 || dt == kFloat64, "cudnn_rnn: float32 or float64 expected, got ", dt);
  return dt == kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}

cudnnRNNMode_t cell_mode(int mode) {
  // native::RnnMode: kRnnTanh, kRnnRelu, kLstm, kGru.
  switch (mode) {
    case 0: return CUDNN_RNN_TANH;
    case 1: return CUDNN_RNN_RELU;
    case 2: return CUDNN_LSTM;
    case 3: return CUDNN_GRU;
  }
  EMBER_INTERNAL_ASSERT(false, "cudnn_rnn: unknown RNN mode ", mode);
  return CUDNN_LSTM;
}

int gate_count(int mode) { return mode == 2 ? 4 : mode == 3 ? 3 : 1; }
int num_directions(const CudnnRnnDesc& d) { return d.bidirectional ? 2 : 1; }
int as_int(int64_t v, const char* what) {
  EMBER_CHECK(v >= 0 && v <= INT32_MAX, "cudnn_rnn: ", what, " ", v, " exceeds cuDNN's int range");
  return static_cast<int>(v);
}

// The RNN descriptor of `d` on handle h (with its dropout descriptor, which must outlive it).
struct Descriptors {
  DropoutDesc dropout;
  RnnDesc rnn;
  Descriptors(cudnnHandle_t h, const CudnnRnnDesc& d) {
    if (d.dropout > 0 && d.dropout_states != nullptr) {
      const float p = static_cast<float>(d.dropout);
      if (d.init_states) {
        EMBER_CUDNN_CHECK(cudnnSetDropoutDescriptor(dropout.d, h, p, d.dropout_states, d.dropout_states_bytes,
                                                    static_cast<unsigned long long>(d.dropout_seed)));
      } else {
        EMBER_CUDNN_CHECK(cudnnRestoreDropoutDescriptor(dropout.d, h, p, d.dropout_states, d.dropout_states_bytes,
                                                        static_cast<unsigned long long>(d.dropout_seed)));
      }
    } else {
      EMBER_CUDNN_CHECK(cudnnSetDropoutDescriptor(dropout.d, h, 0.0f, nullptr, 0, 0));
    }
    const cudnnDataType_t dt = data_type(d.dtype);
    // float32 without tensor-core (TF32) rounding, so that results match the CPU path's.
    const cudnnMathType_t math = d.dtype == kFloat32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
    const int hidden = as_int(d.hidden_size, "hidden_size");
    EMBER_CUDNN_CHECK(cudnnSetRNNDescriptor_v8(
        rnn.d, CUDNN_RNN_ALGO_STANDARD, cell_mode(d.mode), d.bias ? CUDNN_RNN_DOUBLE_BIAS : CUDNN_RNN_NO_BIAS,
        d.bidirectional ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, dt, dt, math,
        as_int(d.input_size, "input_size"), hidden, hidden, as_int(d.num_layers, "num_layers"), dropout.d,
        CUDNN_RNN_PADDED_IO_DISABLED));
  }
};

// x and y descriptors (packed sequence-major) and the [L*D, B, H] state descriptor of a call.
struct CallDescriptors {
  DataDesc x, y;
  TensorDesc h;
  CallDescriptors(const CudnnRnnDesc& d, const CudnnRnnCall& c) {
    const cudnnDataType_t dt = data_type(d.dtype);
    const int batch = as_int(c.batch, "batch"), steps = as_int(c.max_seq_length, "sequence length");
    const int hidden = as_int(d.hidden_size, "hidden_size"), dirs = num_directions(d);
    EMBER_CUDNN_CHECK(cudnnSetRNNDataDescriptor(x.d, dt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, steps, batch,
                                                as_int(d.input_size, "input_size"), c.host_seq_lengths, nullptr));
    EMBER_CUDNN_CHECK(cudnnSetRNNDataDescriptor(y.d, dt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, steps, batch,
                                                dirs * hidden, c.host_seq_lengths, nullptr));
    const int dims[3] = {as_int(d.num_layers * dirs, "num_layers"), batch, hidden};
    const int strides[3] = {batch * hidden, hidden, 1};
    EMBER_CUDNN_CHECK(cudnnSetTensorNdDescriptor(h.d, dt, 3, dims, strides));
  }
};

size_t dropout_states_bytes(int device_index) {
  CudaDeviceGuard guard(device_index);
  size_t n = 0;
  EMBER_CUDNN_CHECK(cudnnDropoutGetStatesSize(cudnn_handle(device_index), &n));
  return n;
}

size_t weight_space_bytes(const CudnnRnnDesc& d) {
  CudaDeviceGuard guard(d.device_index);
  cudnnHandle_t h = cudnn_handle(d.device_index);
  CudnnRnnDesc plain = d;
  plain.dropout = 0;  // the weights do not depend on dropout
  Descriptors descs(h, plain);
  size_t n = 0;
  EMBER_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(h, descs.rnn.d, &n));
  return n;
}

std::vector<int64_t> gate_offsets(const CudnnRnnDesc& d, const void* weight_space, size_t num_bytes) {
  CudaDeviceGuard guard(d.device_index);
  cudnnHandle_t h = cudnn_handle(d.device_index);
  CudnnRnnDesc plain = d;
  plain.dropout = 0;
  Descriptors descs(h, plain);
  const int G = gate_count(d.mode), pseudo_layers = static_cast<int>(d.num_layers) * num_directions(d);
  const size_t elem = element_size(d.dtype);
  const char* base = static_cast<const char*>(weight_space);
  auto offset_of = [&](void* addr) {
    EMBER_INTERNAL_ASSERT(addr != nullptr, "cudnn_rnn: cuDNN reported no address for a weight block");
    const ptrdiff_t bytes = static_cast<const char*>(addr) - base;
    EMBER_INTERNAL_ASSERT(bytes >= 0 && static_cast<size_t>(bytes) < num_bytes && bytes % static_cast<ptrdiff_t>(elem) == 0,
                          "cudnn_rnn: a weight block at byte ", bytes, " of a ", num_bytes, "-byte weight space");
    return static_cast<int64_t>(bytes) / static_cast<int64_t>(elem);
  };
  std::vector<int64_t> out;
  TensorDesc m, b;
  for (int p = 0; p < pseudo_layers; ++p) {
    // ember's order per layer and direction: w_ih (gates), w_hh (gates), b_ih, b_hh.
    std::vector<int64_t> mats(static_cast<size_t>(2 * G)), biases(static_cast<size_t>(2 * G));
    for (int id = 0; id < 2 * G; ++id) {
      void* m_addr = nullptr;
      void* b_addr = nullptr;
      EMBER_CUDNN_CHECK(cudnnGetRNNWeightParams(h, descs.rnn.d, p, num_bytes, weight_space, id, m.d, &m_addr, b.d,
                                                &b_addr));
      mats[static_cast<size_t>(id)] = offset_of(m_addr);
      if (d.bias) biases[static_cast<size_t>(id)] = offset_of(b_addr);
    }
    out.insert(out.end(), mats.begin(), mats.end());
    if (d.bias) out.insert(out.end(), biases.begin(), biases.end());
  }
  return out;
}

void temp_space_bytes(const CudnnRnnDesc& d, const CudnnRnnCall& c, size_t* workspace, size_t* reserve) {
  CudaDeviceGuard guard(d.device_index);
  cudnnHandle_t h = cudnn_handle(d.device_index);
  CudnnRnnDesc no_init = d;
  no_init.init_states = false;  // sizes only: never (re)seed the states here
  Descriptors descs(h, no_init);
  CallDescriptors call(d, c);
  EMBER_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(h, descs.rnn.d,
                                              c.training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE, call.x.d,
                                              workspace, reserve));
}

void forward(const CudnnRnnDesc& d, const CudnnRnnCall& c) {
  CudaDeviceGuard guard(d.device_index);
  cudnnHandle_t h = cudnn_handle(d.device_index);
  const cudaStream_t stream = current_stream(d.device_index);
  // The device copy of the lengths, through pinned memory so that the copy is asynchronous;
  // the pinned block is reused only after the copy has completed (record_stream).
  const size_t len_bytes = static_cast<size_t>(c.batch) * sizeof(int32_t);
  {
    PinnedAllocator& pinned = pinned_allocator();
    DataPtr staging = pinned.allocate(len_bytes);
    std::memcpy(staging.get(), c.host_seq_lengths, len_bytes);
    EMBER_CUDA_CHECK(cudaMemcpyAsync(c.dev_seq_lengths, staging.get(), len_bytes, cudaMemcpyHostToDevice, stream));
    pinned.record_stream(staging.get(), ember::current_stream(Device::cuda(d.device_index)));
  }
  Descriptors descs(h, d);
  CallDescriptors call(d, c);
  EMBER_CUDNN_CHECK(cudnnRNNForward(h, descs.rnn.d, c.training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                                    c.dev_seq_lengths, call.x.d, c.x, call.y.d, c.y, call.h.d, c.hx, c.hy, call.h.d,
                                    c.cx, c.cy, c.weight_space_bytes, c.weight_space, c.workspace_bytes, c.workspace,
                                    c.reserve_bytes, c.reserve));
}

void backward(const CudnnRnnDesc& d, const CudnnRnnCall& c) {
  CudaDeviceGuard guard(d.device_index);
  cudnnHandle_t h = cudnn_handle(d.device_index);
  CudnnRnnDesc no_init = d;
  no_init.init_states = false;  // the masks are in the reserve space; the states are not redrawn
  Descriptors descs(h, no_init);
  CallDescriptors call(d, c);
  EMBER_CUDNN_CHECK(cudnnRNNBackwardData_v8(h, descs.rnn.d, c.dev_seq_lengths, call.y.d, c.y, c.dy, call.x.d, c.dx,
                                            call.h.d, c.hx, c.dhy, c.dhx, call.h.d, c.cx, c.dcy, c.dcx,
                                            c.weight_space_bytes, c.weight_space, c.workspace_bytes, c.workspace,
                                            c.reserve_bytes, c.reserve));
  if (c.dweight_space != nullptr) {
    EMBER_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(h, descs.rnn.d, CUDNN_WGRAD_MODE_ADD, c.dev_seq_lengths, call.x.d, c.x,
                                                 call.h.d, c.hx, call.y.d, c.y, c.weight_space_bytes, c.dweight_space,
                                                 c.workspace_bytes, c.workspace, c.reserve_bytes, c.reserve));
  }
}

const CudnnRnnBackend g_backend{
    .dropout_states_bytes = &dropout_states_bytes,
    .weight_space_bytes = &weight_space_bytes,
    .gate_offsets = &gate_offsets,
    .temp_space_bytes = &temp_space_bytes,
    .forward = &forward,
    .backward = &backward,
};

}  // namespace

const CudnnRnnBackend* cudnn_rnn_backend() { return &g_backend; }

}  // namespace ember::cuda
