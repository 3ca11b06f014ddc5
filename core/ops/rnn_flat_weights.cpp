// Note [RNN flat weights]
// A recurrent module (nn::RNN / LSTM / GRU) keeps all its parameters in ONE buffer, as
// PyTorch's flatten_parameters() does: weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, then
// the same for _reverse, then layer 1, ... (registration order), each parameter a contiguous
// view of its range. named_parameters() keeps PyTorch's names; optimizers, load_state_dict and
// in-place updates write through the views into the buffer. The module re-flattens after
// anything that gives its parameters new storage (to(device), to(dtype), clone), so the buffer
// exists on every device. On the CPU nothing reads the buffer as a whole (each view is an
// ordinary contiguous tensor, so the CPU kernels and their speed are unchanged); it exists there
// so that the mechanics are the same, and tested, everywhere.
//
// cuDNN (core/kernels/cuda/cudnn_rnn.cpp) wants the weights as one "weight space" whose layout it
// reports with cudnnGetRNNWeightParams: per layer and direction the input matrices of each
// gate, the recurrent matrices, then the biases, gates in PyTorch's order (LSTM i,f,g,o; GRU
// r,z,n). That is the concatenation above, so the flat buffer IS the weight space and cuDNN
// reads it in place, and the weight gradient cuDNN writes is one buffer whose views are the
// parameters' gradients. This is checked per configuration, not assumed: the offsets cuDNN
// reports (rnn_gate_offsets form) are compared with the concatenation's.
//
// When the parameters are NOT views of one flat buffer (DataParallel replicas, whose parameters
// are outputs of a broadcast; a parameter the user replaced; a module built from tensors), or
// when cuDNN's offsets differ from the concatenation's, each call copies the parameters into a
// weight space of its own (rnn_pack_weights: one cat, or one copy per gate block when the
// offsets differ) and hands the gradient back per parameter (rnn_unpack_weights). This costs a
// copy of the weights per call and is silent, as PyTorch's non-contiguous fallback is; results
// are the same either way.
#include "core/ops/rnn_flat_weights.h"

#include "core/error.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"

namespace ember::native {

bool rnn_weights_are_flat(const std::vector<Tensor>& weights) {
  if (weights.empty()) return false;
  const Tensor& first = weights[0];
  if (!first.defined()) return false;
  int64_t next = first.storage_offset();
  for (const Tensor& w : weights) {
    if (!w.defined() || !w.is_contiguous() || w.dtype() != first.dtype() || !w.storage().is_same(first.storage()) ||
        w.storage_offset() != next) {
      return false;
    }
    next += w.numel();
  }
  return true;
}

Tensor rnn_concat_weights(const std::vector<Tensor>& weights) {
  EMBER_INTERNAL_ASSERT(!weights.empty(), "rnn_concat_weights: no weights");
  std::vector<Tensor> rows;
  rows.reserve(weights.size());
  for (const Tensor& w : weights) rows.push_back(reshape(w, {w.numel()}));
  return cat(rows, 0);
}

std::vector<int64_t> rnn_gate_offsets(const std::vector<Tensor>& weights, int64_t gates) {
  std::vector<int64_t> out;
  out.reserve(weights.size() * static_cast<size_t>(gates));
  int64_t off = 0;
  for (const Tensor& w : weights) {
    const int64_t block = w.numel() / gates;
    for (int64_t g = 0; g < gates; ++g) out.push_back(off + g * block);
    off += w.numel();
  }
  return out;
}

namespace {
// The gate-g block of w as a 1-D tensor (rows [g*H, (g+1)*H) of a [gates*H, cols] matrix).
Tensor gate_block(const Tensor& w, int64_t gates, int64_t g) {
  const int64_t block = w.numel() / gates;
  return narrow(reshape(w, {w.numel()}), 0, g * block, block);
}

void check_offsets(const std::vector<Tensor>& weights, int64_t gates, const std::vector<int64_t>& offs,
                   int64_t total_elems) {
  EMBER_CHECK_T(ValueError, offs.size() == weights.size() * static_cast<size_t>(gates), "rnn weights: ", offs.size(),
                " gate offsets for ", weights.size(), " weights of ", gates, " gates");
  for (size_t i = 0; i < weights.size(); ++i) {
    const int64_t block = weights[i].numel() / gates;
    EMBER_CHECK_T(ValueError, block * gates == weights[i].numel(), "rnn weights: weight ", i, " of shape ",
                  weights[i].sizes(), " does not split into ", gates, " gates");
    for (int64_t g = 0; g < gates; ++g) {
      const int64_t o = offs[i * static_cast<size_t>(gates) + static_cast<size_t>(g)];
      EMBER_CHECK_T(ValueError, o >= 0 && o + block <= total_elems, "rnn weights: gate ", g, " of weight ", i,
                    " at offset ", o, " (", block, " elements) does not fit a weight space of ", total_elems);
    }
  }
}
}  // namespace

Tensor rnn_pack_weights(const std::vector<Tensor>& weights, int64_t gates, const std::vector<int64_t>& gate_offsets,
                        int64_t total_elems) {
  check_offsets(weights, gates, gate_offsets, total_elems);
  if (gate_offsets == rnn_gate_offsets(weights, gates)) {
    Tensor flat = rnn_concat_weights(weights);
    if (flat.numel() == total_elems) return flat;
  }
  Tensor flat = zeros({total_elems}, TensorOptions(weights[0].dtype()).device(weights[0].device()));
  for (size_t i = 0; i < weights.size(); ++i) {
    const int64_t block = weights[i].numel() / gates;
    for (int64_t g = 0; g < gates; ++g) {
      Tensor dst = narrow(flat, 0, gate_offsets[i * static_cast<size_t>(gates) + static_cast<size_t>(g)], block);
      copy_(dst, gate_block(weights[i], gates, g));
    }
  }
  return flat;
}

std::vector<Tensor> rnn_unpack_weights(const Tensor& flat, const std::vector<Tensor>& weights, int64_t gates,
                                       const std::vector<int64_t>& gate_offsets) {
  check_offsets(weights, gates, gate_offsets, flat.numel());
  std::vector<Tensor> out;
  out.reserve(weights.size());
  const bool concatenated = gate_offsets == rnn_gate_offsets(weights, gates);
  int64_t off = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const Tensor& w = weights[i];
    if (concatenated) {
      out.push_back(view(narrow(flat, 0, off, w.numel()), w.sizes()));
    } else {
      const int64_t block = w.numel() / gates;
      std::vector<Tensor> blocks;
      for (int64_t g = 0; g < gates; ++g) {
        blocks.push_back(narrow(flat, 0, gate_offsets[i * static_cast<size_t>(gates) + static_cast<size_t>(g)], block));
      }
      out.push_back(view(cat(blocks, 0), w.sizes()));
    }
    off += w.numel();
  }
  return out;
}

}  // namespace ember::native
