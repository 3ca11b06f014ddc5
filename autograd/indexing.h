// Python-style indexing of tensors, LibTorch's Tensor::index / index_put_ (core/tensor_index.h
// has the index terms). Differentiable; see Note [Indexing] in autograd/functions/indexing.cpp.
// Thread-safe as the other ops: concurrent reads are fine, writers to one tensor synchronize.
#pragma once
#include <vector>

#include "core/tensor.h"

namespace ember {

/// self[indices]: basic terms (integers, Slices, None, Ellipsis, bools) give a view; tensor
/// terms (int64/int32 indices, bool masks) gather a copy, as in PyTorch. Throws IndexError for
/// an index out of range (naming the dimension and its size), too many indices, a second
/// Ellipsis or a mask whose shape does not match; TypeError for a float index tensor.
Tensor index(const Tensor& self, const std::vector<TensorIndex>& indices);

/// self[indices] = value (accumulate: +=), value broadcast to the shape self[indices] has.
/// Every index is checked before anything is written. Records history when self (a non-leaf)
/// or value requires grad; an in-place write into a leaf that requires grad is an Error.
Tensor& index_put_(Tensor& self, const std::vector<TensorIndex>& indices, const Tensor& value,
                   bool accumulate = false);
Tensor& index_put_(Tensor& self, const std::vector<TensorIndex>& indices, double value);

}  // namespace ember
