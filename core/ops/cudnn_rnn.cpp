// native::cudnn_rnn_forward / _backward (core/ops/nn_native.h): buffers from the caching
// allocator, the weight space, the dropout states, and the calls into core/kernels/cuda/cudnn_rnn.cpp.
//
// Note [cuDNN RNN]
// On CUDA, when ember is built with cuDNN and the configuration is supported
// (cudnn_rnn_usable), nn::RNN / LSTM / GRU run their whole stack (every layer and direction,
// dropout between layers) as ONE cudnnRNNForward over the packed rows, recorded as one autograd
// node (nn/detail/cudnn_rnn.cpp) whose backward is cudnnRNNBackwardData_v8 then
// cudnnRNNBackwardWeights_v8, with the reserve space kept from forward. Padded input is the
// packed case with every sequence of full length ([T, B, F] contiguous is exactly the packed
// layout with batch_sizes all B), so one data layout, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED,
// serves both. The weights are read in place from the module's flat buffer when cuDNN's layout
// is the buffer's (Note [RNN flat weights] in core/ops/rnn_flat_weights.cpp), else copied per
// call. Workspace, reserve space and the weight gradient are tensors from the caching allocator
// on the current stream (the reserve lives in the node until backward). float32 runs with
// CUDNN_FMA_MATH (no TF32) so results match the CPU path within float32 rounding. Everything
// else -- no cuDNN in the build, EMBER_CUDNN=0, set_cudnn_enabled(false), other dtypes -- runs
// the per-layer fallback (nn/detail/rnn_layer.h).
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
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "core/env.h"
#include "core/generator.h"
#include "core/ops/detail/plan.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"
#include "core/ops/detail/cudnn_rnn_plan.h"
#include "core/ops/rnn_flat_weights.h"

namespace ember::native {

namespace detail {
DispatchStub<CudnnRnnBackendFn> cudnn_rnn_backend_stub;
}  // namespace detail

namespace {

using detail::CudnnRnnBackend;
using detail::CudnnRnnCall;
using detail::CudnnRnnDesc;

// -1: not read yet; 0 off; 1 on.
std::atomic<int> g_cudnn_enabled{-1};
std::atomic<uint64_t> g_forward_count{0};  // cudnn_rnn_forward_count()

const CudnnRnnBackend* backend_of(const Tensor& t) {
  const DeviceType type = t.device().type;
  if (!detail::cudnn_rnn_backend_stub.has_kernel(type)) return nullptr;
  return detail::cudnn_rnn_backend_stub.kernel(t.device(), "rnn")();
}

CudnnRnnDesc desc_of(const CudnnRnnConfig& c, const Tensor& x) {
  CudnnRnnDesc d;
  d.mode = static_cast<int>(c.mode);
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

const Layout& layout_of(const CudnnRnnBackend& be, const CudnnRnnDesc& d, Device device) {
  const LayoutKey key{d.mode, static_cast<int>(d.dtype), d.device_index, d.input_size, d.hidden_size, d.num_layers,
                      d.bidirectional, d.bias};
  {
    std::lock_guard<std::mutex> lock(g_layout_mu);
    auto it = g_layouts.find(key);
    if (it != g_layouts.end()) return it->second;
  }
  Layout l;
  l.bytes = be.weight_space_bytes(d);
  // cuDNN reports addresses inside a real weight space; the offsets do not depend on its contents.
  Tensor probe = byte_buffer(l.bytes, device);
  l.gate_offsets = be.gate_offsets(d, probe.raw_data(), l.bytes);
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
CudnnRnnCall make_call(const CudnnRnnBackend& be, const CudnnRnnDesc& d, const CudnnRnnSaved& s, bool training,
                       const Tensor& x, const Tensor& y, const Tensor& hx, const Tensor& cx, Tensor* workspace,
                       size_t* reserve_bytes) {
  CudnnRnnCall call;
  call.training = training;
  call.batch = static_cast<int64_t>(s.seq_lengths.size());
  call.max_seq_length = s.max_seq_length;
  call.host_seq_lengths = s.seq_lengths.data();
  call.dev_seq_lengths = static_cast<int32_t*>(s.dev_seq_lengths.raw_data());
  size_t workspace_bytes = 0;
  be.temp_space_bytes(d, call, &workspace_bytes, reserve_bytes);
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

bool cudnn_enabled() {
  int v = g_cudnn_enabled.load(std::memory_order_relaxed);
  if (v < 0) {
    v = env::flag("EMBER_CUDNN", true) ? 1 : 0;
    int expected = -1;
    if (!g_cudnn_enabled.compare_exchange_strong(expected, v)) v = expected;
  }
  return v == 1;
}

void set_cudnn_enabled(bool on) { g_cudnn_enabled.store(on ? 1 : 0); }

uint64_t cudnn_rnn_forward_count() { return g_forward_count.load(std::memory_order_relaxed); }

bool cudnn_rnn_usable(const CudnnRnnConfig& c, const Tensor& input) {
  if (!input.defined() || !cudnn_enabled()) return false;
  if (input.dtype() != kFloat32 && input.dtype() != kFloat64) return false;
  if (backend_of(input) == nullptr) return false;
  constexpr int64_t kMax = INT32_MAX;
  const int64_t D = c.bidirectional ? 2 : 1;
  return c.input_size <= kMax && c.hidden_size * D * gate_count(c.mode) <= kMax && c.num_layers * D <= kMax &&
         input.size(0) <= kMax;
}

void cudnn_rnn_record_stream(const CudnnRnnSaved& s, Stream stream) {
  for (const Tensor* t : {&s.weight_space, &s.reserve, &s.dev_seq_lengths}) {
    if (t->defined()) t->record_stream(stream);
  }
}

CudnnRnnForward cudnn_rnn_forward(const CudnnRnnConfig& c, const Tensor& input, const PackedSteps& steps,
                                  const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights,
                                  bool need_backward) {
  const CudnnRnnBackend* be = backend_of(input);
  EMBER_INTERNAL_ASSERT(be != nullptr, "cudnn_rnn_forward: cuDNN is not available for ", input.device());
  g_forward_count.fetch_add(1, std::memory_order_relaxed);
  const Device device = input.device();
  const TensorOptions opts = TensorOptions(input.dtype()).device(device);
  const int64_t D = c.bidirectional ? 2 : 1, H = c.hidden_size, B = steps.batch_sizes[0], G = gate_count(c.mode);
  const bool lstm = c.mode == RnnMode::kLstm;
  CudnnRnnDesc d = desc_of(c, input);
  CudnnRnnForward out;
  CudnnRnnSaved& s = out.saved;

  // Weights: the flat buffer in place when cuDNN's layout is its own (Note [RNN flat weights]).
  const Layout& layout = layout_of(*be, d, device);
  s.weight_space_bytes = layout.bytes;
  s.gate_offsets = layout.gate_offsets;
  int64_t total = 0;
  for (const Tensor& w : weights) total += w.numel();
  const bool in_place = rnn_weights_are_flat(weights) && layout.gate_offsets == rnn_gate_offsets(weights, G) &&
                        static_cast<size_t>(total) * element_size(input.dtype()) == layout.bytes;
  if (in_place) {
    s.weight_space = weights[0];  // its data pointer is the start of the flat buffer
  } else {
    s.weight_space = rnn_pack_weights(weights, G, layout.gate_offsets,
                                      static_cast<int64_t>(layout.bytes / element_size(input.dtype())));
  }

  const Tensor x = contiguous(input);
  out.output = empty({steps.num_rows, D * H}, opts);
  out.h_n = empty({c.num_layers * D, B, H}, opts);
  if (lstm) out.c_n = empty({c.num_layers * D, B, H}, opts);
  const Tensor hx = h0.defined() ? contiguous(h0) : Tensor();
  const Tensor cx = lstm && c0.defined() ? contiguous(c0) : Tensor();
  s.seq_lengths = sequence_lengths(steps);
  s.max_seq_length = static_cast<int64_t>(steps.batch_sizes.size());
  s.dev_seq_lengths = empty({B}, TensorOptions(kInt32).device(device));

  const bool dropout = c.training && c.dropout > 0 && c.num_layers > 1;
  std::unique_lock<std::mutex> states_lock;
  if (dropout) {
    DropoutSlot& slot = g_dropout[device.index];
    states_lock = std::unique_lock<std::mutex>(slot.mu);
    if (!slot.states.defined()) slot.states = byte_buffer(be->dropout_states_bytes(device.index), device);
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
  CudnnRnnCall call = make_call(*be, d, s, need_backward || dropout, x, out.output, hx, cx, &workspace, &reserve_bytes);
  if (call.training) {
    s.reserve = byte_buffer(reserve_bytes, device);
    s.reserve_bytes = reserve_bytes;
    call.reserve = s.reserve.raw_data();
    call.reserve_bytes = reserve_bytes;
  }
  call.hy = out.h_n.raw_data();
  call.cy = ptr_or_null(out.c_n);
  be->forward(d, call);
  if (!need_backward) s = CudnnRnnSaved{};
  return out;
}

CudnnRnnGrads cudnn_rnn_backward(const CudnnRnnConfig& c, const CudnnRnnSaved& s, const Tensor& input,
                                 const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights,
                                 const Tensor& output, const Tensor& d_output, const Tensor& d_h_n,
                                 const Tensor& d_c_n, bool need_weights) {
  const CudnnRnnBackend* be = backend_of(input);
  EMBER_INTERNAL_ASSERT(be != nullptr && s.reserve.defined(), "cudnn_rnn_backward: no cuDNN forward state");
  const Device device = input.device();
  const TensorOptions opts = TensorOptions(input.dtype()).device(device);
  const bool lstm = c.mode == RnnMode::kLstm;
  const int64_t D = c.bidirectional ? 2 : 1, H = c.hidden_size, B = static_cast<int64_t>(s.seq_lengths.size());
  CudnnRnnDesc d = desc_of(c, input);
  use_dropout(d, s);
  const Tensor x = contiguous(input);
  const Tensor y = contiguous(output);
  const Tensor dy = d_output.defined() ? contiguous(d_output) : zeros(output.sizes(), opts);
  const Tensor dhy = d_h_n.defined() ? contiguous(d_h_n) : Tensor();
  const Tensor dcy = lstm && d_c_n.defined() ? contiguous(d_c_n) : Tensor();
  const Tensor hx = h0.defined() ? contiguous(h0) : Tensor();
  const Tensor cx = lstm && c0.defined() ? contiguous(c0) : Tensor();
  CudnnRnnGrads g;
  g.d_input = empty(x.sizes(), opts);
  g.d_h0 = empty({c.num_layers * D, B, H}, opts);
  if (lstm) g.d_c0 = empty({c.num_layers * D, B, H}, opts);
  const int64_t ws_elems = static_cast<int64_t>(s.weight_space_bytes / element_size(input.dtype()));
  const Tensor dw = need_weights ? zeros({ws_elems}, opts) : Tensor();

  Tensor workspace;
  size_t reserve_bytes = 0;
  CudnnRnnCall call = make_call(*be, d, s, /*training=*/true, x, y, hx, cx, &workspace, &reserve_bytes);
  EMBER_INTERNAL_ASSERT(reserve_bytes <= s.reserve_bytes, "cudnn_rnn_backward: reserve space of ", s.reserve_bytes,
                        " bytes, cuDNN wants ", reserve_bytes);
  call.dy = dy.raw_data();
  call.dx = g.d_input.raw_data();
  call.dhy = ptr_or_null(dhy);
  call.dhx = g.d_h0.raw_data();
  call.dcy = ptr_or_null(dcy);
  call.dcx = ptr_or_null(g.d_c0);
  call.dweight_space = ptr_or_null(dw);
  be->backward(d, call);
  // See Note [cuDNN RNN streams].
  const Stream stream = current_stream(device);
  cudnn_rnn_record_stream(s, stream);
  for (const Tensor* t : {&x, &y, &hx, &cx}) {
    if (t->defined()) t->record_stream(stream);
  }
  if (need_weights) g.d_weights = rnn_unpack_weights(dw, weights, gate_count(c.mode), s.gate_offsets);
  return g;
}

}  // namespace ember::native
