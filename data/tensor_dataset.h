// TensorDataset: rows of one or more tensors sharing their first dimension; sample i is
// {t[i] for t in tensors} (views, no copy), as torch.utils.data.TensorDataset.
// Immutable after construction; get() is thread-safe.
#pragma once
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"

namespace ember::data {

class TensorDataset : public Dataset<std::vector<Tensor>> {
 public:
  /// Throws ValueError when `tensors` is empty, a tensor is 0-dim, or first dimensions differ.
  explicit TensorDataset(std::vector<Tensor> tensors);
  /// Throws IndexError when index >= size().
  std::vector<Tensor> get(size_t index) override;
  size_t size() const override { return size_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<Tensor> tensors_;
  size_t size_ = 0;
};

}  // namespace ember::data
