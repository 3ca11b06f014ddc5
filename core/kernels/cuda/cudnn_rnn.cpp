// The cuDNN RNN: the CUDA kernels of cudnn_rnn_forward_stub / cudnn_rnn_backward_stub
// (core/ops/rnn_stubs.h; built with cuDNN only). The whole stack over packed sequence-major
// rows: cuDNN's weight layout per configuration (queried once, cached), the weight space (the
// module's flat buffer in place, or a packed copy), the per-device dropout states, workspace
// and reserve space from the caching allocator, and the cuDNN 9 calls (descriptors built per
// call, cudnnRNNForward, cudnnRNNBackwardData_v8 / cudnnRNNBackwardWeights_v8). Thread-safe.
//
// Note [cuDNN RNN]
// On CUDA, when ember is built with cuDNN and the configuration is supported
// (cudnn_rnn_usable), nn::RNN / LSTM / GRU run their whole stack (every layer and direction,
// dropout between layers) as ONE cudnnRNNForward over the packed rows, recorded as one autograd
// node (autograd/functions/rnn.cpp) whose backward is cudnnRNNBackwardData_v8 then
// cudnnRNNBackwardWeights_v8, with the reserve space kept from forward. Padded input is the
// packed case with every sequence of full length ([T, B, F] contiguous is exactly the packed
// layout with batch_sizes all B), so one data layout, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED,
// serves both. The weights are read in place from the module's flat buffer when cuDNN's layout
// is the buffer's (Note [RNN flat weights] in core/ops/rnn_flat_weights.cpp), else copied per
// call. Workspace, reserve space and the weight gradient are tensors from the caching allocator
// on the current stream (the reserve lives in the node until backward). float32 runs with
// CUDNN_FMA_MATH (no TF32) so results match the CPU path within float32 rounding. Everything
// else -- no cuDNN in the build, EMBER_CUDNN=0, set_cudnn_enabled(false), other dtypes -- runs
// the per-layer fallback (autograd/functions/rnn.h over native::rnn_layer_forward).
//
// Note [cuDNN dropout state]
// cuDNN draws dropout masks from a state buffer (cudnnDropoutGetStatesSize bytes) that is
// expensive to initialize. Each device has one, kept for the process, used under a mutex (a
// forward reads and advances it). It is (re)initialized from a seed drawn from the device's
// default generator when first used and again whenever that generator has been re-seeded since
// (Generator::seed_epoch: manual_seed, seed, set_state), so manual_seed(s) makes the masks of
// the calls that follow reproducible, as PyTorch's reset_rnn_state does. Between re-seeds the
// state advances with each call (cudnnRestoreDropoutDescriptor), so masks differ per step. The
// masks differ from the fallback's (ember's Philox dropout), as they do between PyTorch's CPU
// and cuDNN paths.
//
// Note [cuDNN RNN streams]
// A forward allocates its buffers (weight-space copy, reserve space, device sequence lengths)
// on the current stream of the thread that ran it; the backward runs on the engine's stream for
// the device, the backward caller's current stream (autograd/engine.cpp), which may be another
// one. The caching allocator reuses a block only on the stream it was allocated for, so once
// the node frees these buffers that stream could reuse them while the backward's kernels are
// still queued on the other. The backward therefore marks every buffer of the forward it hands
// to cuDNN (those above, and x, y, h0, c0) with record_stream on its own stream
// (cudnn_rnn_record_stream for the saved ones): their blocks then wait for that stream's event
// before reuse. A no-op when both ran on the same stream. Ordering the backward after the
// forward's work is the engine's business, not this file's.
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_device.h"
#include "core/cuda/cuda_stream.h"
#include "core/cuda/cudnn_check.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/kernels/cuda/rnn.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"
#include "core/ops/rnn_flat_weights.h"
#include "core/pinned_memory.h"
#include "core/stream.h"

namespace ember::cuda {
namespace {

using native::CudnnRnnConfig;
using native::CudnnRnnForward;
using native::CudnnRnnGrads;
using native::CudnnRnnSaved;
using native::PackedSteps;
using native::RnnMode;

// What the cuDNN RNN descriptor is built from. Every pointer here and in CudnnRnnCall is
// device memory of `device_index` unless said otherwise.
struct CudnnRnnDesc {
  RnnMode mode = RnnMode::kLstm;
  DType dtype = kFloat32;
  int device_index = 0;
  int64_t input_size = 0, hidden_size = 0, num_layers = 1;
  bool bidirectional = false, bias = true;
  // Dropout between layers: p and the per-device state buffer (Note [cuDNN dropout state]).
  // p == 0: no dropout, states may be null. init_states: the call
  // (re)initializes the states from `seed` (cudnnSetDropoutDescriptor); otherwise it reuses
  // them (cudnnRestoreDropoutDescriptor).
  double dropout = 0.0;
  void* dropout_states = nullptr;
  size_t dropout_states_bytes = 0;
  uint64_t dropout_seed = 0;
  bool init_states = false;
};

// One forward or backward call over packed sequence-major data (cuDNN's
// CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, which is ember's packed layout): batch sequences,
// sorted by length (longest first), host_seq_lengths[b] their lengths (host memory),
// dev_seq_lengths the same int32 values in device memory (filled by forward).
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

cudnnRNNMode_t cell_mode(RnnMode mode) {
  switch (mode) {
    case RnnMode::kRnnTanh: return CUDNN_RNN_TANH;
    case RnnMode::kRnnRelu: return CUDNN_RNN_RELU;
    case RnnMode::kLstm: return CUDNN_LSTM;
    case RnnMode::kGru: return CUDNN_GRU;
  }
  EMBER_INTERNAL_ASSERT(false, "cudnn_rnn: unknown RNN mode ", static_cast<int>(mode));
  return CUDNN_LSTM;
}

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
  const int G = static_cast<int>(native::gate_count(d.mode)), pseudo_layers = static_cast<int>(d.num_layers) * num_directions(d);
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

void run_forward(const CudnnRnnDesc& d, const CudnnRnnCall& c) {
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

void run_backward(const CudnnRnnDesc& d, const CudnnRnnCall& c) {
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

CudnnRnnDesc desc_of(const CudnnRnnConfig& c, const Tensor& x) {
  CudnnRnnDesc d;
  d.mode = c.mode;
  d.dtype = x.dtype();
  d.device_index = x.device().index;
  d.input_size = c.input_size;
  d.hidden_size = c.hidden_size;
  d.num_layers = c.num_layers;
  d.bidirectional = c.bidirectional;
  d.bias = c.bias;
  return d;
}

// A byte buffer of at least num_bytes on `device` (8-byte elements), from the caching allocator.
Tensor byte_buffer(size_t num_bytes, Device device) {
  const int64_t n = static_cast<int64_t>((num_bytes + 7) / 8);
  return empty({n}, TensorOptions(kInt64).device(device));
}

void* ptr_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

// cuDNN's weight layout per configuration (weight-space bytes and gate offsets), queried once.
struct Layout {
  size_t bytes = 0;
  std::vector<int64_t> gate_offsets;
};
using LayoutKey = std::tuple<int, int, int, int64_t, int64_t, int64_t, bool, bool>;
std::mutex g_layout_mu;
std::map<LayoutKey, Layout> g_layouts;  // guarded by g_layout_mu

const Layout& layout_of(const CudnnRnnDesc& d, Device device) {
  const LayoutKey key{static_cast<int>(d.mode), static_cast<int>(d.dtype), d.device_index, d.input_size, d.hidden_size, d.num_layers,
                      d.bidirectional, d.bias};
  {
    std::lock_guard<std::mutex> lock(g_layout_mu);
    auto it = g_layouts.find(key);
    if (it != g_layouts.end()) return it->second;
  }
  Layout l;
  l.bytes = weight_space_bytes(d);
  // cuDNN reports addresses inside a real weight space; the offsets do not depend on its contents.
  Tensor probe = byte_buffer(l.bytes, device);
  l.gate_offsets = gate_offsets(d, probe.raw_data(), l.bytes);
  std::lock_guard<std::mutex> lock(g_layout_mu);
  return g_layouts.emplace(key, std::move(l)).first->second;  // std::map: references stay valid
}

// See Note [cuDNN dropout state].
struct DropoutSlot {
  std::mutex mu;  // held across a forward that uses the states
  Tensor states;  // guarded by mu
  uint64_t epoch = 0;  // guarded by mu; the generator's seed_epoch at the last (re)initialization
  bool initialized = false;  // guarded by mu
  uint64_t seed = 0;  // guarded by mu
};
DropoutSlot g_dropout[kMaxDevicesPerType];

// The fields a forward and its backward share: the sequences of `s` (lengths on host and
// device), the data x / y, the initial states, the weight space and reserve space of `s`, and a
// workspace of the size cuDNN asks for in that mode, allocated into *workspace. *reserve_bytes:
// the reserve size cuDNN asks for (a forward allocates it, a backward checks it).
CudnnRnnCall make_call(const CudnnRnnDesc& d, const CudnnRnnSaved& s, bool training,
                       const Tensor& x, const Tensor& y, const Tensor& hx, const Tensor& cx, Tensor* workspace,
                       size_t* reserve_bytes) {
  CudnnRnnCall call;
  call.training = training;
  call.batch = static_cast<int64_t>(s.seq_lengths.size());
  call.max_seq_length = s.max_seq_length;
  call.host_seq_lengths = s.seq_lengths.data();
  call.dev_seq_lengths = static_cast<int32_t*>(s.dev_seq_lengths.raw_data());
  size_t workspace_bytes = 0;
  temp_space_bytes(d, call, &workspace_bytes, reserve_bytes);
  *workspace = byte_buffer(workspace_bytes, x.device());
  call.x = x.raw_data();
  call.y = y.raw_data();
  call.hx = ptr_or_null(hx);
  call.cx = ptr_or_null(cx);
  call.weight_space = s.weight_space.raw_data();
  call.weight_space_bytes = s.weight_space_bytes;
  call.workspace = workspace->raw_data();
  call.workspace_bytes = workspace_bytes;
  call.reserve = ptr_or_null(s.reserve);
  call.reserve_bytes = s.reserve_bytes;
  return call;
}

// The dropout fields of d from what a forward recorded in s (no dropout when it used none).
void use_dropout(CudnnRnnDesc& d, const CudnnRnnSaved& s) {
  if (!s.dropout_states.defined()) return;
  d.dropout = s.dropout;
  d.dropout_states = s.dropout_states.raw_data();
  d.dropout_states_bytes = static_cast<size_t>(s.dropout_states.numel()) * 8;
  d.dropout_seed = s.dropout_seed;
}

std::vector<int32_t> sequence_lengths(const PackedSteps& steps) {
  std::vector<int32_t> lens(static_cast<size_t>(steps.batch_sizes[0]), 0);
  for (int64_t b : steps.batch_sizes) {
    for (int64_t i = 0; i < b; ++i) ++lens[static_cast<size_t>(i)];
  }
  return lens;
}

}  // namespace

CudnnRnnForward cudnn_rnn_forward(const CudnnRnnConfig& c, const Tensor& input, const PackedSteps& steps,
                                  const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights,
                                  bool need_backward) {
  const Device device = input.device();
  const TensorOptions opts = TensorOptions(input.dtype()).device(device);
  const int64_t D = c.bidirectional ? 2 : 1, H = c.hidden_size, B = steps.batch_sizes[0], G = native::gate_count(c.mode);
  const bool lstm = c.mode == RnnMode::kLstm;
  CudnnRnnDesc d = desc_of(c, input);
  CudnnRnnForward out;
  CudnnRnnSaved& s = out.saved;

  // Weights: the flat buffer in place when cuDNN's layout is its own (Note [RNN flat weights]).
  const Layout& layout = layout_of(d, device);
  s.weight_space_bytes = layout.bytes;
  s.gate_offsets = layout.gate_offsets;
  int64_t total = 0;
  for (const Tensor& w : weights) total += w.numel();
  const bool in_place = native::rnn_weights_are_flat(weights) && layout.gate_offsets == native::rnn_gate_offsets(weights, G) &&
                        static_cast<size_t>(total) * element_size(input.dtype()) == layout.bytes;
  if (in_place) {
    s.weight_space = weights[0];  // its data pointer is the start of the flat buffer
  } else {
    s.weight_space = native::rnn_pack_weights(weights, G, layout.gate_offsets,
                                      static_cast<int64_t>(layout.bytes / element_size(input.dtype())));
  }

  const Tensor x = native::contiguous(input);
  out.output = empty({steps.num_rows, D * H}, opts);
  out.h_n = empty({c.num_layers * D, B, H}, opts);
  if (lstm) out.c_n = empty({c.num_layers * D, B, H}, opts);
  const Tensor hx = h0.defined() ? native::contiguous(h0) : Tensor();
  const Tensor cx = lstm && c0.defined() ? native::contiguous(c0) : Tensor();
  s.seq_lengths = sequence_lengths(steps);
  s.max_seq_length = static_cast<int64_t>(steps.batch_sizes.size());
  s.dev_seq_lengths = empty({B}, TensorOptions(kInt32).device(device));

  const bool dropout = c.training && c.dropout > 0 && c.num_layers > 1;
  std::unique_lock<std::mutex> states_lock;
  if (dropout) {
    DropoutSlot& slot = g_dropout[device.index];
    states_lock = std::unique_lock<std::mutex>(slot.mu);
    if (!slot.states.defined()) slot.states = byte_buffer(dropout_states_bytes(device.index), device);
    Generator& gen = default_generator(device);
    const uint64_t epoch = gen.seed_epoch();
    if (!slot.initialized || slot.epoch != epoch) {
      slot.seed = gen.next_u64();
      slot.epoch = epoch;
      slot.initialized = true;
      d.init_states = true;
    }
    s.dropout_states = slot.states;
    s.dropout_seed = slot.seed;
    s.dropout = c.dropout;
    use_dropout(d, s);
  }

  Tensor workspace;
  size_t reserve_bytes = 0;
  CudnnRnnCall call = make_call(d, s, need_backward || dropout, x, out.output, hx, cx, &workspace, &reserve_bytes);
  if (call.training) {
    s.reserve = byte_buffer(reserve_bytes, device);
    s.reserve_bytes = reserve_bytes;
    call.reserve = s.reserve.raw_data();
    call.reserve_bytes = reserve_bytes;
  }
  call.hy = out.h_n.raw_data();
  call.cy = ptr_or_null(out.c_n);
  run_forward(d, call);
  if (!need_backward) s = CudnnRnnSaved{};
  return out;
}

CudnnRnnGrads cudnn_rnn_backward(const CudnnRnnConfig& c, const CudnnRnnSaved& s, const Tensor& input,
                                 const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights,
                                 const Tensor& output, const Tensor& d_output, const Tensor& d_h_n,
                                 const Tensor& d_c_n, bool need_weights) {
  EMBER_INTERNAL_ASSERT(s.reserve.defined(), "cudnn_rnn_backward: no cuDNN forward state");
  const Device device = input.device();
  const TensorOptions opts = TensorOptions(input.dtype()).device(device);
  const bool lstm = c.mode == RnnMode::kLstm;
  const int64_t D = c.bidirectional ? 2 : 1, H = c.hidden_size, B = static_cast<int64_t>(s.seq_lengths.size());
  CudnnRnnDesc d = desc_of(c, input);
  use_dropout(d, s);
  const Tensor x = native::contiguous(input);
  const Tensor y = native::contiguous(output);
  const Tensor dy = d_output.defined() ? native::contiguous(d_output) : zeros(output.sizes(), opts);
  const Tensor dhy = d_h_n.defined() ? native::contiguous(d_h_n) : Tensor();
  const Tensor dcy = lstm && d_c_n.defined() ? native::contiguous(d_c_n) : Tensor();
  const Tensor hx = h0.defined() ? native::contiguous(h0) : Tensor();
  const Tensor cx = lstm && c0.defined() ? native::contiguous(c0) : Tensor();
  CudnnRnnGrads g;
  g.d_input = empty(x.sizes(), opts);
  g.d_h0 = empty({c.num_layers * D, B, H}, opts);
  if (lstm) g.d_c0 = empty({c.num_layers * D, B, H}, opts);
  const int64_t ws_elems = static_cast<int64_t>(s.weight_space_bytes / element_size(input.dtype()));
  const Tensor dw = need_weights ? zeros({ws_elems}, opts) : Tensor();

  Tensor workspace;
  size_t reserve_bytes = 0;
  CudnnRnnCall call = make_call(d, s, /*training=*/true, x, y, hx, cx, &workspace, &reserve_bytes);
  EMBER_INTERNAL_ASSERT(reserve_bytes <= s.reserve_bytes, "cudnn_rnn_backward: reserve space of ", s.reserve_bytes,
                        " bytes, cuDNN wants ", reserve_bytes);
  call.dy = dy.raw_data();
  call.dx = g.d_input.raw_data();
  call.dhy = ptr_or_null(dhy);
  call.dhx = g.d_h0.raw_data();
  call.dcy = ptr_or_null(dcy);
  call.dcx = ptr_or_null(g.d_c0);
  call.dweight_space = ptr_or_null(dw);
  run_backward(d, call);
  // See Note [cuDNN RNN streams].
  const Stream stream = ember::current_stream(device);
  native::cudnn_rnn_record_stream(s, stream);
  for (const Tensor* t : {&x, &y, &hx, &cx}) {
    if (t->defined()) t->record_stream(stream);
  }
  if (need_weights) g.d_weights = native::rnn_unpack_weights(dw, weights, native::gate_count(c.mode), s.gate_offsets);
  return g;
}

}  // namespace ember::cuda
