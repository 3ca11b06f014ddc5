#include "nn/rnn.h"

#include <cmath>
#include <sstream>

#include "autograd/autocast.h"
#include "autograd/functions/nn_layers.h"
#include "autograd/functions/rnn.h"
#include "autograd/ops.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "core/ops/rnn_flat_weights.h"
#include "core/detail/checked_math.h"

namespace ember::nn {
namespace detail {
namespace {

const char* module_name(RnnMode m) {
  switch (m) {
    case RnnMode::kLstm: return "LSTM";
    case RnnMode::kGru: return "GRU";
    default: return "RNN";
  }
}

std::string size_tuple(const IntList& s) {
  std::ostringstream os;
  os << '(';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ')';
  return os.str();
}

std::vector<int64_t> int64_values(const Tensor& t) {
  return t.to_vector<int64_t>();
}

// Reorders dim 1 of a [L*D, B, H] state: out[:, j] = state[:, perm[j]].
Tensor permute_batch(const Tensor& state, const Tensor& permutation) {
  if (!permutation.defined() || !state.defined()) return state;
  std::vector<int64_t> perm = int64_values(permutation);
  const int64_t layers = state.size(0), batch = state.size(1);
  EMBER_CHECK_T(ValueError, static_cast<int64_t>(perm.size()) == batch, "rnn: the permutation has ", perm.size(),
                " entries for a batch of ", batch);
  auto map = std::make_shared<autograd::functions::RowMap>();
  ember::detail::translate_bad_alloc("RNN", ember::detail::host_bytes(static_cast<uint64_t>(layers * batch), sizeof(int64_t)),
                                     [&] { map->index.resize(static_cast<size_t>(layers * batch)); });
  for (int64_t l = 0; l < layers; ++l) {
    for (int64_t j = 0; j < batch; ++j) map->index[static_cast<size_t>(l * batch + j)] = l * batch + perm[static_cast<size_t>(j)];
  }
  map->compute_inverse(layers * batch, "RNN");
  return autograd::functions::gather_rows(state, map, state.sizes());
}

void check_state(const RnnConfig& c, const Tensor& h, const IntList& expected, const char* what) {
  EMBER_CHECK(h.sizes() == expected, "Expected ", what, " size ", size_tuple(expected), ", got ", h.sizes());
}

void check_dtypes(const RnnConfig& c, const std::vector<Tensor>& weights, const Tensor& x, const Tensor& h0,
                  const Tensor& c0) {
  const char* name = module_name(c.mode);
  EMBER_CHECK_T(TypeError, x.dtype() == kFloat32 || x.dtype() == kFloat64, name,
                ": expected a float32 or float64 input, got ", x.dtype());
  for (const Tensor& w : weights) {
    EMBER_CHECK_T(TypeError, w.dtype() == x.dtype() && w.device() == x.device(), name, ": input is ", x.dtype(),
                  " on ", x.device(), " but a parameter is ", w.dtype(), " on ", w.device(),
                  "; convert the module with to(dtype) or the input to match");
  }
  for (const Tensor* h : {&h0, &c0}) {
    EMBER_CHECK_T(TypeError, !h->defined() || (h->dtype() == x.dtype() && h->device() == x.device()), name,
                  ": input is ", x.dtype(), " on ", x.device(), " but a hidden state is ", h->dtype(), " on ",
                  h->device());
  }
}

// The stack over packed rows; h0/c0 [L*D, B, H] in sorted order (undefined = zeros).
std::tuple<Tensor, Tensor, Tensor> forward_rows(const RnnConfig& c, const std::vector<Tensor>& weights, bool training,
                                                const Tensor& data, const std::shared_ptr<const native::PackedSteps>& steps,
                                                const Tensor& h0, const Tensor& c0) {
  native::CudnnRnnConfig cc = c;  // the stack's part of the module's configuration
  cc.training = training;
  auto r = autograd::functions::rnn(cc, data, steps, h0, c0, weights);
  return {r.output, r.h_n, r.c_n};
}

// Autocast puts the RNN layers on the lower-precision list (Note [Autocast op lists]): true when
// it is on for x's device and x and the weights are float32/bfloat16/float16 (float64 runs as is).
bool autocast_applies(const Tensor& x, const std::vector<Tensor>& weights) {
  auto eligible = [](const Tensor& t) {
    return !t.defined() || t.dtype() == kFloat32 || t.dtype() == kBFloat16 || t.dtype() == kFloat16;
  };
  if (!autograd::autocast_active_for(x) || !eligible(x)) return false;
  for (const Tensor& w : weights) {
    if (!eligible(w)) return false;
  }
  return true;
}

// t rounded to the autocast dtype, then widened to float32 for the float32 recurrence kernels;
// both casts are differentiable, so gradients are rounded the same way on their way back.
Tensor rounded_float32(const Tensor& t) {
  return t.defined() ? to(autograd::autocast_to_lower(t), kFloat32) : t;
}
std::vector<Tensor> rounded_float32(const std::vector<Tensor>& ts) {
  std::vector<Tensor> r;
  r.reserve(ts.size());
  for (const Tensor& t : ts) r.push_back(rounded_float32(t));
  return r;
}
Tensor to_low(const Tensor& t, DType low) { return t.defined() ? to(t, low) : t; }

}  // namespace

void rnn_check_config(const RnnConfig& c) {
  const char* name = module_name(c.mode);
  EMBER_CHECK_T(ValueError, c.input_size > 0 && c.hidden_size > 0, name,
                ": input_size and hidden_size must be positive, got ", c.input_size, " and ", c.hidden_size);
  EMBER_CHECK_T(ValueError, c.num_layers > 0, name, ": num_layers must be greater than or equal to 1, got ",
                c.num_layers);
  EMBER_CHECK_T(ValueError, c.dropout >= 0 && c.dropout <= 1,
                "dropout should be a number in range [0, 1] representing the probability of an element being zeroed, "
                "got ", c.dropout);
}

void rnn_register_parameters(Module& m, const RnnConfig& c) {
  const int64_t G = gate_count(c.mode), H = c.hidden_size, D = c.num_directions();
  // Note [RNN flat weights]: the parameters are born as views of one buffer, in registration
  // order, so the module is flat without a copy. (Registering separate tensors and flattening
  // after copied every weight once per construction, and DataParallel builds a replica per
  // device every step: 0.4 ms per step on ember-bench-dp's model before CPU replicas alias.)
  struct Slot {
    std::string name;
    IntList sizes;
    int64_t numel;
  };
  std::vector<Slot> slots;
  int64_t total = 0;
  auto add = [&](std::string name, IntList sizes) {
    const int64_t numel = numel_of(sizes, module_name(c.mode));
    total = ember::detail::checked_add(total, numel, module_name(c.mode), sizes, "the parameter count");
    slots.push_back({std::move(name), std::move(sizes), numel});
  };
  for (int64_t l = 0; l < c.num_layers; ++l) {
    for (int64_t d = 0; d < D; ++d) {
      const std::string suffix = "_l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
      const int64_t in = l == 0 ? c.input_size : H * D;
      add("weight_ih" + suffix, {G * H, in});
      add("weight_hh" + suffix, {G * H, H});
      if (c.bias) {
        add("bias_ih" + suffix, {G * H});
        add("bias_hh" + suffix, {G * H});
      }
    }
  }
  NoGradGuard no_grad;
  const Tensor flat = empty({total});
  int64_t off = 0;
  for (const Slot& slot : slots) {
    m.register_parameter(slot.name, native::view(native::narrow(flat, 0, off, slot.numel), slot.sizes));
    off += slot.numel;
  }
  rnn_reset_parameters(m, c);
}

void rnn_flatten_parameters(std::vector<std::pair<std::string, Tensor>>& params) {
  std::vector<Tensor> ws;
  for (const auto& [n, p] : params) {
    if (!p.defined()) return;  // a removed parameter: nothing to lay out
    ws.push_back(p);
  }
  if (ws.empty() || native::rnn_weights_are_flat(ws)) return;
  for (const Tensor& w : ws) {
    // Mixed devices or dtypes (a half-moved module): leave them; each call then copies.
    if (w.device() != ws[0].device() || w.dtype() != ws[0].dtype()) return;
  }
  NoGradGuard no_grad;
  const Tensor flat = native::rnn_concat_weights(ws);
  int64_t off = 0;
  for (auto& [n, p] : params) {
    const int64_t numel = p.numel();
    Module::set_data(p, native::view(native::narrow(flat, 0, off, numel), p.sizes()));
    off += numel;
  }
}

void rnn_reset_parameters(Module& m, const RnnConfig& c) {
  if (SkipInitGuard::active()) return;
  NoGradGuard no_grad;
  const double stdv = 1.0 / std::sqrt(static_cast<double>(c.hidden_size));
  for (Tensor& p : m.parameters(/*recurse=*/false)) uniform_(p, -stdv, stdv);
}

std::tuple<Tensor, Tensor, Tensor> rnn_forward_padded(const RnnConfig& c, const std::vector<Tensor>& weights,
                                                      bool training, const Tensor& input, const Tensor& h0,
                                                      const Tensor& c0) {
  if (autocast_applies(input, weights)) {
    const DType low = autograd::AutocastMode::dtype(input.device().type);
    const std::vector<Tensor> w = rounded_float32(weights);
    const Tensor x = rounded_float32(input), h = rounded_float32(h0), cc = rounded_float32(c0);
    std::tuple<Tensor, Tensor, Tensor> r;
    {
      autograd::autocast off(input.device().type, low, /*enabled=*/false);
      r = rnn_forward_padded(c, w, training, x, h, cc);
    }
    return {to_low(std::get<0>(r), low), to_low(std::get<1>(r), low), to_low(std::get<2>(r), low)};
  }
  const char* name = module_name(c.mode);
  const bool lstm = c.mode == RnnMode::kLstm;
  EMBER_CHECK(input.defined(), name, ": input is undefined");
  EMBER_CHECK_T(ValueError, input.dim() == 2 || input.dim() == 3, name, ": Expected input to be 2D or 3D, got ",
                input.dim(), "D instead");
  EMBER_CHECK_T(ValueError, !lstm || h0.defined() == c0.defined(), name,
                ": expected both h0 and c0 or neither, got only ", h0.defined() ? "h0" : "c0");
  const bool batched = input.dim() == 3;
  const int64_t batch_dim = c.batch_first ? 0 : 1;
  for (const Tensor* h : {&h0, &c0}) {
    if (!h->defined()) continue;
    if (batched) {
      EMBER_CHECK(h->dim() == 3, "For batched 3-D input, hx should also be 3-D but got ", h->dim(), "-D tensor");
    } else {
      EMBER_CHECK(h->dim() == 2, "For unbatched 2-D input, hx should also be 2-D but got ", h->dim(), "-D tensor");
    }
  }
  Tensor x = batched ? input : unsqueeze(input, batch_dim);
  if (c.batch_first) x = transpose(x, 0, 1);
  EMBER_CHECK(x.size(2) == c.input_size, "input.size(-1) must be equal to input_size. Expected ", c.input_size,
              ", got ", x.size(2));
  const int64_t T = x.size(0), B = x.size(1), D = c.num_directions();
  EMBER_CHECK_T(ValueError, T > 0 && B > 0, name, ": expected at least one time step and one batch element, got input of shape ",
                input.sizes());
  Tensor h = h0.defined() && !batched ? unsqueeze(h0, 1) : h0;
  Tensor cc = c0.defined() && !batched ? unsqueeze(c0, 1) : c0;
  const IntList expected{c.num_layers * D, B, c.hidden_size};
  if (h.defined()) check_state(c, h, expected, lstm ? "hidden[0]" : "hidden");
  if (cc.defined()) check_state(c, cc, expected, "hidden[1]");
  check_dtypes(c, weights, x, h, cc);

  Tensor data = reshape(contiguous(x), {T * B, c.input_size});
  auto steps = native::PackedSteps::make(std::vector<int64_t>(static_cast<size_t>(T), B));
  auto [y, h_n, c_n] = forward_rows(c, weights, training, data, steps, h, cc);
  Tensor out = view(y, {T, B, D * c.hidden_size});
  if (c.batch_first) out = transpose(out, 0, 1);
  if (!batched) {
    out = squeeze(out, batch_dim);
    h_n = squeeze(h_n, 1);
    if (c_n.defined()) c_n = squeeze(c_n, 1);
  }
  return {out, h_n, c_n};
}

std::tuple<PackedSequence, Tensor, Tensor> rnn_forward_packed(const RnnConfig& c, const std::vector<Tensor>& weights,
                                                              bool training, const PackedSequence& input,
                                                              const Tensor& h0, const Tensor& c0) {
  if (input.data.defined() && autocast_applies(input.data, weights)) {
    const DType low = autograd::AutocastMode::dtype(input.data.device().type);
    PackedSequence rounded(rounded_float32(input.data), input.batch_sizes, input.sorted_indices,
                           input.unsorted_indices);
    const std::vector<Tensor> w = rounded_float32(weights);
    const Tensor h = rounded_float32(h0), cc = rounded_float32(c0);
    std::tuple<PackedSequence, Tensor, Tensor> r;
    {
      autograd::autocast off(input.data.device().type, low, /*enabled=*/false);
      r = rnn_forward_packed(c, w, training, rounded, h, cc);
    }
    auto& [y, h_n, c_n] = r;
    PackedSequence out(to_low(y.data, low), y.batch_sizes, y.sorted_indices, y.unsorted_indices);
    return {std::move(out), to_low(h_n, low), to_low(c_n, low)};
  }
  const char* name = module_name(c.mode);
  const bool lstm = c.mode == RnnMode::kLstm;
  EMBER_CHECK(input.data.defined() && input.batch_sizes.defined(), name, ": the PackedSequence has no data");
  EMBER_CHECK_T(ValueError, input.data.dim() == 2, name, ": expected packed data of shape [N, input_size], got ",
                input.data.sizes());
  EMBER_CHECK(input.data.size(1) == c.input_size, "input.size(-1) must be equal to input_size. Expected ",
              c.input_size, ", got ", input.data.size(1));
  EMBER_CHECK_T(ValueError, !lstm || h0.defined() == c0.defined(), name,
                ": expected both h0 and c0 or neither, got only ", h0.defined() ? "h0" : "c0");
  // batch_sizes are host metadata, read with one copy from whichever device they are on.
  EMBER_CHECK_T(ValueError, input.batch_sizes.dim() == 1 && !input.batch_sizes.is_floating_point(), name,
                ": batch_sizes must be a 1-D integer tensor, got ", input.batch_sizes.sizes(), " ",
                input.batch_sizes.dtype());
  auto steps = native::PackedSteps::make(int64_values(input.batch_sizes));
  EMBER_CHECK_T(ValueError, steps->num_rows == input.data.size(0), name, ": batch_sizes sum to ", steps->num_rows,
                " but the packed data has ", input.data.size(0), " rows");
  const int64_t B = steps->batch_sizes[0];
  const IntList expected{c.num_layers * c.num_directions(), B, c.hidden_size};
  if (h0.defined()) check_state(c, h0, expected, lstm ? "hidden[0]" : "hidden");
  if (c0.defined()) check_state(c, c0, expected, "hidden[1]");
  check_dtypes(c, weights, input.data, h0, c0);
  // States arrive in the caller's batch order; the layers see sorted order (PyTorch's permute_hidden).
  Tensor h = permute_batch(h0, input.sorted_indices);
  Tensor cc = permute_batch(c0, input.sorted_indices);
  auto [y, h_n, c_n] = forward_rows(c, weights, training, input.data, steps, h, cc);
  h_n = permute_batch(h_n, input.unsorted_indices);
  if (c_n.defined()) c_n = permute_batch(c_n, input.unsorted_indices);
  PackedSequence out(y, input.batch_sizes, input.sorted_indices, input.unsorted_indices);
  return {std::move(out), h_n, c_n};
}

void rnn_pretty_print(std::ostream& os, const char* name, const RnnConfig& c) {
  os << name << "(" << c.input_size << ", " << c.hidden_size;
  if (c.num_layers != 1) os << ", num_layers=" << c.num_layers;
  if (!c.bias) os << ", bias=False";
  if (c.batch_first) os << ", batch_first=True";
  if (c.dropout != 0) os << ", dropout=" << c.dropout;
  if (c.bidirectional) os << ", bidirectional=True";
  os << ")";
}

}  // namespace detail

namespace {
detail::RnnMode rnn_mode_of(const std::string& nonlinearity) {
  if (nonlinearity == "tanh") return detail::RnnMode::kRnnTanh;
  if (nonlinearity == "relu") return detail::RnnMode::kRnnRelu;
  EMBER_THROW(ValueError, "Unknown nonlinearity '", nonlinearity, "'. Select from 'tanh' or 'relu'.");
}
}  // namespace

RNNImpl::RNNImpl(const RNNOptions& options) : RNNBase("RNN", rnn_mode_of(options.nonlinearity_), options) {}

std::tuple<Tensor, Tensor> RNNImpl::forward(const Tensor& input, const Tensor& hx) { return run_hidden(input, hx); }
std::tuple<PackedSequence, Tensor> RNNImpl::forward(const PackedSequence& input, const Tensor& hx) {
  return run_hidden(input, hx);
}

std::tuple<Tensor, LSTMImpl::State> LSTMImpl::forward(const Tensor& input, const std::optional<State>& hx) {
  return run_lstm(input, hx);
}
std::tuple<PackedSequence, LSTMImpl::State> LSTMImpl::forward(const PackedSequence& input, const std::optional<State>& hx) {
  return run_lstm(input, hx);
}

std::tuple<Tensor, Tensor> GRUImpl::forward(const Tensor& input, const Tensor& hx) { return run_hidden(input, hx); }
std::tuple<PackedSequence, Tensor> GRUImpl::forward(const PackedSequence& input, const Tensor& hx) {
  return run_hidden(input, hx);
}

}  // namespace ember::nn
