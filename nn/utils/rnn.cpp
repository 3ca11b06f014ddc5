#include "nn/utils/rnn.h"

#include <algorithm>
#include <memory>
#include <numeric>

#include "autograd/ops.h"
#include "core/detail/checked_math.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "autograd/functions/nn_layers.h"

namespace ember::nn::utils::rnn {

using autograd::functions::gather_rows;
using autograd::functions::RowMap;
using ember::detail::checked_mul;
using ember::detail::host_bytes;
using ember::detail::translate_bad_alloc;

namespace {

std::vector<int64_t> to_int64_vector(const Tensor& t) {
  return t.to_vector<int64_t>();
}

Tensor int64_tensor(const std::vector<int64_t>& v) { return from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}); }

const char* torch_type_name(DType t) {
  switch (t) {
    case kFloat32: return "Float";
    case kFloat64: return "Double";
    case kInt64: return "Long";
    case kInt32: return "Int";
    case kBool: return "Bool";
    case kBFloat16: return "BFloat16";
    case kFloat16: return "Half";
  }
  return "?";
}

// Offsets of each time step's rows in the packed data, checked against the data's row count.
std::vector<int64_t> step_offsets(const std::vector<int64_t>& batch_sizes, int64_t num_rows, const char* op) {
  std::vector<int64_t> offs(batch_sizes.size());
  int64_t off = 0;
  for (size_t t = 0; t < batch_sizes.size(); ++t) {
    EMBER_CHECK_T(ValueError, batch_sizes[t] > 0 && (t == 0 || batch_sizes[t] <= batch_sizes[t - 1]), op,
                  ": batch_sizes must be positive and non-increasing, got ", batch_sizes);
    offs[t] = off;
    off += batch_sizes[t];
  }
  EMBER_CHECK_T(ValueError, off == num_rows, op, ": batch_sizes sum to ", off, " but data has ", num_rows, " rows");
  return offs;
}

}  // namespace

PackedSequence::PackedSequence(Tensor data_, Tensor batch_sizes_, Tensor sorted_indices_, Tensor unsorted_indices_)
    : data(std::move(data_)),
      batch_sizes(std::move(batch_sizes_)),
      sorted_indices(std::move(sorted_indices_)),
      unsorted_indices(std::move(unsorted_indices_)) {
  if (!unsorted_indices.defined()) unsorted_indices = invert_permutation(sorted_indices);
}

PackedSequence PackedSequence::to(Device device) const {
  if (data.defined() && data.device() == device) return *this;
  PackedSequence out = *this;
  out.data = ember::to(data, device);
  if (sorted_indices.defined()) out.sorted_indices = native::to(sorted_indices, device);
  if (unsorted_indices.defined()) out.unsorted_indices = native::to(unsorted_indices, device);
  return out;
}

PackedSequence PackedSequence::to(DType dtype) const {
  if (data.defined() && data.dtype() == dtype) return *this;
  PackedSequence out = *this;
  out.data = ember::to(data, dtype);
  return out;
}

Tensor invert_permutation(const Tensor& permutation) {
  if (!permutation.defined()) return Tensor();
  EMBER_CHECK_T(ValueError, permutation.dim() == 1 && permutation.dtype() == kInt64,
                "invert_permutation: expected a 1-D int64 tensor, got ", permutation.dim(), "-D ", permutation.dtype());
  std::vector<int64_t> p = to_int64_vector(permutation);
  std::vector<int64_t> inv(p.size(), -1);
  for (size_t i = 0; i < p.size(); ++i) {
    EMBER_CHECK_T(ValueError, p[i] >= 0 && p[i] < static_cast<int64_t>(p.size()) && inv[static_cast<size_t>(p[i])] == -1,
                  "invert_permutation: expected a permutation of 0..", p.size() - 1, ", got ", p);
    inv[static_cast<size_t>(p[i])] = static_cast<int64_t>(i);
  }
  return native::to(int64_tensor(inv), permutation.device());
}

PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths, bool batch_first, bool enforce_sorted) {
  // lengths are host metadata: a tensor on any device is read with one copy (to_vector).
  EMBER_CHECK_T(ValueError, lengths.defined() && lengths.dim() == 1 && !lengths.is_floating_point(),
              "'lengths' argument should be a 1D CPU int64 tensor, but got ", lengths.defined() ? lengths.dim() : 0,
              "D ", !lengths.defined() || lengths.device().is_cpu() ? "cpu" : "cuda", " ",
              lengths.defined() ? torch_type_name(lengths.dtype()) : "undefined", " tensor");
  return pack_padded_sequence(input, to_int64_vector(lengths), batch_first, enforce_sorted);
}

PackedSequence pack_padded_sequence(const Tensor& input, const std::vector<int64_t>& lengths_in, bool batch_first,
                                    bool enforce_sorted) {
  EMBER_CHECK_T(IndexError, input.dim() >= 2, "pack_padded_sequence: expected input of shape ",
                batch_first ? "[B, T, *]" : "[T, B, *]", ", got a ", input.dim(), "-D tensor of shape ", input.sizes());
  const int64_t time_dim = batch_first ? 1 : 0;
  const int64_t batch_size = input.size(batch_first ? 0 : 1);
  const int64_t in_steps = input.size(time_dim);
  const int64_t num_lengths = static_cast<int64_t>(lengths_in.size());

  // Sort by length, descending; ties keep their order (torch.sort(descending=True, stable=True)).
  std::vector<int64_t> order(lengths_in.size());
  std::iota(order.begin(), order.end(), 0);
  if (!enforce_sorted) {
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lengths_in[a] > lengths_in[b]; });
  }
  std::vector<int64_t> lengths(lengths_in.size());
  for (size_t j = 0; j < order.size(); ++j) lengths[j] = lengths_in[static_cast<size_t>(order[j])];

  // Every bad length is a ValueError (issue 19, item 8), worded as PyTorch words it.
  EMBER_CHECK_T(ValueError, input.numel() > 0, "Cannot pack empty tensors.");
  EMBER_CHECK_T(ValueError, num_lengths == batch_size, "Expected `len(lengths)` to be equal to batch_size, but got ",
                num_lengths, " (batch_size=", batch_size, ")");
  EMBER_CHECK_T(ValueError, lengths[static_cast<size_t>(batch_size - 1)] > 0,
                "Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0");
  for (int64_t i = 0; i + 1 < batch_size; ++i) {
    EMBER_CHECK_T(ValueError, lengths[static_cast<size_t>(i)] >= lengths[static_cast<size_t>(i + 1)],
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
                "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement if "
                "you do not need ONNX exportability.");
  }
  const int64_t max_len = lengths[0];
  EMBER_CHECK_T(ValueError, max_len <= in_steps, "pack_padded_sequence: the longest length (", max_len,
                ") exceeds the input's time dimension of size ", in_steps, " (input shape ", input.sizes(), ")");

  // Host buffers sized from the input's shape, which may be an expanded view of far more rows
  // than exist in memory: checked before they are made (Note [Checked shape arithmetic]).
  const int64_t num_packed = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});  // <= input.numel()
  std::vector<int64_t> batch_sizes;
  auto map = std::make_shared<RowMap>();
  translate_bad_alloc("pack_padded_sequence", host_bytes(static_cast<uint64_t>(max_len) + num_packed, sizeof(int64_t)), [&] {
    batch_sizes.resize(static_cast<size_t>(max_len));
    map->index.reserve(static_cast<size_t>(num_packed));
  });
  for (int64_t t = 0, active = batch_size; t < max_len; ++t) {
    while (lengths[static_cast<size_t>(active - 1)] <= t) --active;
    batch_sizes[static_cast<size_t>(t)] = active;
    for (int64_t j = 0; j < active; ++j) {
      int64_t b = order[static_cast<size_t>(j)];
      map->index.push_back(batch_first ? b * in_steps + t : t * batch_size + b);
    }
  }
  map->compute_inverse(in_steps * batch_size, "pack_padded_sequence");

  IntList out_sizes{static_cast<int64_t>(map->index.size())};
  out_sizes.insert(out_sizes.end(), input.sizes().begin() + 2, input.sizes().end());
  Tensor data = gather_rows(input, map, out_sizes);
  Tensor sorted_indices;
  if (!enforce_sorted) sorted_indices = native::to(int64_tensor(order), input.device());
  return PackedSequence(std::move(data), int64_tensor(batch_sizes), std::move(sorted_indices));
}

std::pair<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence, bool batch_first, double padding_value,
                                              std::optional<int64_t> total_length) {
  EMBER_CHECK_T(ValueError, sequence.data.defined() && sequence.batch_sizes.defined(),
                "pad_packed_sequence: the PackedSequence has no data");
  const Tensor& data = sequence.data;
  EMBER_CHECK_T(ValueError, data.dim() >= 1, "pad_packed_sequence: expected data of shape [N, *], got ", data.sizes());
  // batch_sizes are host metadata; one moved to a device (a nested to()) is read with one copy.
  EMBER_CHECK_T(ValueError, sequence.batch_sizes.dim() == 1 && !sequence.batch_sizes.is_floating_point(),
                "pad_packed_sequence: batch_sizes should be a 1-D integer tensor, got ", sequence.batch_sizes.dim(),
                "-D ", sequence.batch_sizes.dtype(), " on ", sequence.batch_sizes.device());
  std::vector<int64_t> bs = to_int64_vector(sequence.batch_sizes);
  EMBER_CHECK_T(ValueError, !bs.empty(), "pad_packed_sequence: batch_sizes is empty");
  std::vector<int64_t> offs = step_offsets(bs, data.size(0), "pad_packed_sequence");
  int64_t max_seq_length = static_cast<int64_t>(bs.size());
  if (total_length.has_value()) {
    EMBER_CHECK_T(ValueError, *total_length >= max_seq_length,
                  "Expected total_length to be at least the length of the longest sequence in input, but got "
                  "total_length=", *total_length, " and max sequence length being ", max_seq_length);
    max_seq_length = *total_length;
  }
  const int64_t batch_size = bs[0];
  // The padded output's shape, checked before anything of its size is allocated (Note [Checked
  // shape arithmetic] in core/detail/checked_math.cpp): total_length = 2^62 once overflowed here.
  IntList out_sizes = batch_first ? IntList{batch_size, max_seq_length} : IntList{max_seq_length, batch_size};
  out_sizes.insert(out_sizes.end(), data.sizes().begin() + 1, data.sizes().end());
  (void)ember::detail::checked_nbytes(out_sizes, data.element_size(), "pad_packed_sequence");
  const int64_t out_rows = checked_mul(max_seq_length, batch_size, "pad_packed_sequence", out_sizes);
  // The row map (out_rows entries) is the largest host buffer here; every other one (batch_size
  // entries, data.size(0) <= out_rows for the inverse) is smaller, so it is made and checked first.
  auto map = std::make_shared<RowMap>();
  translate_bad_alloc("pad_packed_sequence", host_bytes(static_cast<uint64_t>(out_rows), sizeof(int64_t)),
                      [&] { map->index.assign(static_cast<size_t>(out_rows), -1); });
  // Original batch element b sits at sorted position unsorted[b].
  std::vector<int64_t> unsorted(static_cast<size_t>(batch_size));
  std::iota(unsorted.begin(), unsorted.end(), 0);
  if (sequence.unsorted_indices.defined()) {
    unsorted = to_int64_vector(sequence.unsorted_indices);
    EMBER_CHECK_T(ValueError, static_cast<int64_t>(unsorted.size()) == batch_size,
                  "pad_packed_sequence: unsorted_indices has ", unsorted.size(), " entries for a batch of ", batch_size);
    std::vector<bool> seen(static_cast<size_t>(batch_size), false);
    for (int64_t j : unsorted) {
      EMBER_CHECK_T(ValueError, j >= 0 && j < batch_size && !seen[static_cast<size_t>(j)],
                    "pad_packed_sequence: unsorted_indices must be a permutation of 0..", batch_size - 1, ", got ",
                    unsorted);
      seen[static_cast<size_t>(j)] = true;
    }
  }
  std::vector<int64_t> lengths(static_cast<size_t>(batch_size), 0);
  for (int64_t b = 0; b < batch_size; ++b) {
    int64_t j = unsorted[static_cast<size_t>(b)];
    for (size_t t = 0; t < bs.size() && j < bs[t]; ++t) {
      int64_t out_row = batch_first ? b * max_seq_length + static_cast<int64_t>(t)
                                    : static_cast<int64_t>(t) * batch_size + b;
      map->index[static_cast<size_t>(out_row)] = offs[t] + j;
      ++lengths[static_cast<size_t>(b)];
    }
  }
  map->compute_inverse(data.size(0), "pad_packed_sequence");
  Tensor padded = gather_rows(data, map, out_sizes, padding_value);
  return {std::move(padded), int64_tensor(lengths)};
}

Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first, double padding_value) {
  EMBER_CHECK(!sequences.empty(), "received an empty list of sequences");
  const Tensor& first = sequences[0];
  EMBER_CHECK_T(ValueError, first.defined() && first.dim() >= 1,
                "pad_sequence: expected sequences of shape [L, *], got sequence 0 of shape ",
                first.defined() ? first.sizes() : IntList{});
  const IntList trailing(first.sizes().begin() + 1, first.sizes().end());
  int64_t max_len = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const Tensor& s = sequences[i];
    EMBER_CHECK_T(ValueError, s.defined() && s.dim() >= 1 && IntList(s.sizes().begin() + 1, s.sizes().end()) == trailing,
                  "pad_sequence: expected every sequence to be [L, ", trailing, "...] like sequence 0 (shape ",
                  first.sizes(), "), but sequence ", i, " has shape ", s.defined() ? s.sizes() : IntList{});
    EMBER_CHECK_T(TypeError, s.dtype() == first.dtype() && s.device() == first.device(),
                  "pad_sequence: expected every sequence to be ", first.dtype(), " on ", first.device(), ", but sequence ",
                  i, " is ", s.dtype(), " on ", s.device());
    max_len = std::max(max_len, s.size(0));
  }
  const int64_t batch_size = static_cast<int64_t>(sequences.size());
  IntList out_sizes = batch_first ? IntList{batch_size, max_len} : IntList{max_len, batch_size};
  out_sizes.insert(out_sizes.end(), trailing.begin(), trailing.end());
  (void)ember::detail::checked_nbytes(out_sizes, first.element_size(), "pad_sequence");
  const int64_t out_rows = checked_mul(max_len, batch_size, "pad_sequence", out_sizes);
  auto map = std::make_shared<RowMap>();
  translate_bad_alloc("pad_sequence", host_bytes(static_cast<uint64_t>(out_rows), sizeof(int64_t)),
                      [&] { map->index.assign(static_cast<size_t>(out_rows), -1); });
  int64_t row = 0;
  for (int64_t b = 0; b < batch_size; ++b) {
    for (int64_t t = 0; t < sequences[static_cast<size_t>(b)].size(0); ++t, ++row) {
      map->index[static_cast<size_t>(batch_first ? b * max_len + t : t * batch_size + b)] = row;
    }
  }
  map->compute_inverse(row, "pad_sequence");
  Tensor all = sequences.size() == 1 ? sequences[0] : cat(sequences, 0);
  return gather_rows(all, map, out_sizes, padding_value);
}

PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted) {
  std::vector<int64_t> lengths;
  lengths.reserve(sequences.size());
  for (const auto& s : sequences) lengths.push_back(s.defined() && s.dim() >= 1 ? s.size(0) : 0);
  return pack_padded_sequence(pad_sequence(sequences), lengths, /*batch_first=*/false, enforce_sorted);
}

}  // namespace ember::nn::utils::rnn
