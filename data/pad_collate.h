// PadCollate: batches variable-length 1-D sequences (token ids, ...) by padding them to the
// longest one, as torch.nn.utils.rnn.pad_sequence, and returns (padded, lengths):
// padded is [B, T_max] when batch_first, else [T_max, B], with the samples' dtype; lengths is
// int64 [B]. Stateless after construction; thread-safe.
#pragma once
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ember::data {

class PadCollate {
 public:
  explicit PadCollate(double padding_value = 0.0, bool batch_first = false)
      : padding_value_(padding_value), batch_first_(batch_first) {}
  /// Throws ValueError for an empty batch, a sample that is not 1-D, or mixed dtypes.
  std::pair<Tensor, Tensor> operator()(const std::vector<Tensor>& samples) const;

  double padding_value() const { return padding_value_; }
  bool batch_first() const { return batch_first_; }

 private:
  double padding_value_;
  bool batch_first_;
};

}  // namespace ember::data
