// nn::utils::rnn: PackedSequence and the functions that build and undo it, with PyTorch's
// semantics and error texts (torch.nn.utils.rnn). A PackedSequence holds the time steps of a
// batch of variable-length sequences, longest first, each step's active rows contiguous.
// Every function is differentiable in its tensor data (gradients flow from the packed or padded
// result back to the input) and is thread-safe: they only read their arguments.
#pragma once
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "core/nested.h"
#include "core/tensor.h"

namespace ember::nn::utils::rnn {

/// See torch.nn.utils.rnn.PackedSequence.
/// - data: [sum(lengths), *], the rows of time step 0 for every sequence, then of step 1, ...
/// - batch_sizes: int64 [T] on the CPU, non-increasing; batch_sizes[t] sequences are longer than t.
/// - sorted_indices: int64 [B] or undefined; the batch element (of the caller's order) that
///   became sorted position j. unsorted_indices: its inverse (undefined together with it).
struct PackedSequence {
  Tensor data;
  Tensor batch_sizes;
  Tensor sorted_indices;
  Tensor unsorted_indices;

  PackedSequence() = default;
  /// Computes unsorted_indices from sorted_indices when it is not given (like PyTorch's constructor).
  PackedSequence(Tensor data, Tensor batch_sizes, Tensor sorted_indices = Tensor(), Tensor unsorted_indices = Tensor());

  bool is_defined() const { return data.defined(); }
  /// The same sequence with data (and the index tensors) on `device`; batch_sizes stays on the CPU.
  PackedSequence to(Device device) const;
  /// The same sequence with data converted to `dtype`.
  PackedSequence to(DType dtype) const;
};

/// The inverse permutation: out[perm[i]] = i. Undefined in, undefined out. Throws ValueError for
/// anything but a 1-D int64 permutation of 0..n-1.
Tensor invert_permutation(const Tensor& permutation);

/// Packs input [T, B, *] (or [B, T, *] with batch_first) whose sequence b has lengths[b] steps.
/// lengths: int64 (or int32) 1-D CPU tensor, or a vector, one per batch element, each in [1, T].
/// enforce_sorted: lengths must be non-increasing; otherwise the batch is sorted by length
/// (descending; ties keep their order, i.e. torch.sort(descending=True, stable=True)) and the
/// permutation is recorded in sorted_indices. Throws Error with PyTorch's texts for unsorted
/// lengths, lengths <= 0, a lengths count that is not the batch size, and empty input.
PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths, bool batch_first = false,
                                    bool enforce_sorted = true);
PackedSequence pack_padded_sequence(const Tensor& input, const std::vector<int64_t>& lengths, bool batch_first = false,
                                    bool enforce_sorted = true);

/// Undoes pack_padded_sequence: returns (padded [T', B, *] or [B, T', *], lengths int64 [B] on the
/// CPU), in the original batch order when the sequence has sorted_indices. Positions past a
/// sequence's end hold padding_value. T' = total_length if given (throws ValueError when it is
/// shorter than the longest sequence), else the longest length.
std::pair<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence, bool batch_first = false,
                                              double padding_value = 0.0,
                                              std::optional<int64_t> total_length = std::nullopt);

/// Stacks sequences [L_i, *] (same trailing shape and dtype) into [max L, B, *] (or [B, max L, *]),
/// filling the tail of shorter ones with padding_value. Throws Error for an empty list.
Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first = false, double padding_value = 0.0);

/// pack_padded_sequence(pad_sequence(sequences), their lengths, false, enforce_sorted).
PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted = true);

}  // namespace ember::nn::utils::rnn

/// A PackedSequence is a nested value of its four tensors (core/nested.h): DDP finds its data's
/// graph, a DataLoader worker sends it through shared memory, to() and friends can map it.
template <>
struct ember::NestedTensors<ember::nn::utils::rnn::PackedSequence> {
  static constexpr bool enabled = true;
  using Seq = ember::nn::utils::rnn::PackedSequence;
  template <class F>
  static void for_each(const Seq& v, F&& f) {
    f(v.data);
    f(v.batch_sizes);
    f(v.sorted_indices);
    f(v.unsorted_indices);
  }
  template <class F>
  static Seq map(const Seq& v, F&& f) {
    Seq out;  // member by member, in for_each's order (Note [Nested order])
    out.data = f(v.data);
    out.batch_sizes = f(v.batch_sizes);
    out.sorted_indices = f(v.sorted_indices);
    out.unsorted_indices = f(v.unsorted_indices);
    return out;
  }
};
