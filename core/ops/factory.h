// Factory functions: new tensors from sizes, values or external memory. Thread-safe.
#pragma once
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace ember {

Tensor empty(const IntList& sizes, TensorOptions options = {});
Tensor zeros(const IntList& sizes, TensorOptions options = {});
Tensor ones(const IntList& sizes, TensorOptions options = {});
Tensor full(const IntList& sizes, double value, TensorOptions options = {});
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
/// [0, end) or [start, end) by step; int64 unless options say otherwise.
Tensor arange(int64_t end, TensorOptions options = TensorOptions(kInt64));
Tensor arange(double start, double end, double step, TensorOptions options = TensorOptions(kInt64));
Tensor eye(int64_t n, TensorOptions options = {});
/// A scalar (0-dim) tensor.
Tensor scalar_tensor(double value, TensorOptions options = {});

/// Copies `values` into a new tensor of shape `sizes` (default: 1-D) on `device`.
template <typename T>
Tensor from_vector(const std::vector<T>& values, IntList sizes = {}, Device device = Device::cpu());
/// float32 from a list: tensor({1, 2, 3}), or with a shape: tensor({1, 2, 3, 4}, {2, 2}).
/// Integer literals give float32 too (torch::tensor would give int64): pass kInt64 for that.
Tensor tensor(std::initializer_list<double> values, IntList sizes = {}, TensorOptions options = {});
Tensor tensor(std::initializer_list<double> values, TensorOptions options);
/// Rows of equal length: tensor({{1, 2}, {3, 4}}) is [2, 2] float32 (ValueError for ragged rows).
Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, TensorOptions options = {});
/// torch::tensor(std::vector<T>): a 1-D copy whose dtype follows T (float -> float32, double ->
/// float64, int64_t -> int64, int32_t -> int32, bool -> bool) unless options give one.
template <typename T>
Tensor tensor(const std::vector<T>& values, TensorOptions options = {});

/// Wraps memory owned elsewhere without copying; `deleter` (may be empty) runs when the last user is gone.
Tensor from_blob(void* data, const IntList& sizes, DType dtype, std::function<void(void*)> deleter = {},
                 Device device = Device::cpu());

}  // namespace ember
