// The flat weight buffer of the recurrent layers (Note [RNN flat weights] in
// core/ops/rnn_flat_weights.cpp): how a module's parameters sit in one buffer, and how that
// buffer maps onto a cuDNN weight space. Device-neutral (native ops only); stateless and
// thread-safe.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ember::native {

/// True when `weights` (all defined, same dtype) are contiguous views of one storage, each
/// starting where the previous one ends: the flat buffer of Note [RNN flat weights].
bool rnn_weights_are_flat(const std::vector<Tensor>& weights);

/// The one buffer holding `weights` one after another (1-D, numel = the sum of theirs, on
/// their device and dtype), filled with their values. Does not record autograd history.
Tensor rnn_concat_weights(const std::vector<Tensor>& weights);

/// Where each gate block of each weight starts in the concatenation of `weights` (in
/// elements): entry i * gates + g is the start of rows [g*H, (g+1)*H) of weights[i] (a matrix
/// [gates*H, cols] or a bias [gates*H]). The layout ember keeps; cuDNN reports its own
/// (cudnnGetRNNWeightParams) in the same form, and the two are compared with ==.
std::vector<int64_t> rnn_gate_offsets(const std::vector<Tensor>& weights, int64_t gates);

/// A 1-D buffer of `total_elems` elements (zeros outside the blocks) holding each gate block
/// of `weights` at `gate_offsets` (the form of rnn_gate_offsets). Throws ValueError when a
/// block does not fit.
Tensor rnn_pack_weights(const std::vector<Tensor>& weights, int64_t gates, const std::vector<int64_t>& gate_offsets,
                        int64_t total_elems);

/// The inverse of rnn_pack_weights for gradients: one tensor per weight, shaped like it, read
/// from `flat` at `gate_offsets`. When the offsets are the concatenation's (the usual case)
/// the results are views of `flat`, else copies.
std::vector<Tensor> rnn_unpack_weights(const Tensor& flat, const std::vector<Tensor>& weights, int64_t gates,
                                       const std::vector<int64_t>& gate_offsets);

}  // namespace ember::native
