#include "data/tensor_dataset.h"

#include "core/ops/native.h"

namespace ember::data {

TensorDataset::TensorDataset(std::vector<Tensor> tensors) : tensors_(std::move(tensors)) {
  EMBER_CHECK_T(ValueError, !tensors_.empty(), "TensorDataset: expected at least one tensor");
  for (size_t i = 0; i < tensors_.size(); ++i) {
    EMBER_CHECK_T(ValueError, tensors_[i].defined() && tensors_[i].dim() >= 1, "TensorDataset: tensor ", i,
                  " must have at least one dimension");
    EMBER_CHECK_T(ValueError, tensors_[i].size(0) == tensors_[0].size(0),
                  "TensorDataset: size mismatch between tensors: tensor 0 has ", tensors_[0].size(0),
                  " rows, tensor ", i, " has ", tensors_[i].size(0));
  }
  size_ = static_cast<size_t>(tensors_[0].size(0));
}

std::vector<Tensor> TensorDataset::get(size_t index) {
  EMBER_CHECK_T(IndexError, index < size_, "TensorDataset: index ", index, " out of range for size ", size_);
  std::vector<Tensor> row;
  row.reserve(tensors_.size());
  for (const auto& t : tensors_) row.push_back(native::select(t, 0, static_cast<int64_t>(index)));
  return row;
}

}  // namespace ember::data
