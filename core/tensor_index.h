// Index terms for Tensor::index / index_put_, in LibTorch's spelling (torch::indexing):
// x.index({Slice(0, 5), 1, None, Ellipsis, mask}) is Python's x[0:5, 1, None, ..., mask].
// Plain values (no tensor math here); the ops that use them are in autograd/indexing.h.
// Thread-safe as values.
#pragma once
#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <type_traits>

#include "core/error.h"
#include "core/tensor.h"

namespace ember::indexing {

/// Python's None in an index: inserts a dimension of size 1. Also an open Slice bound.
inline constexpr std::nullopt_t None = std::nullopt;

struct EllipsisIndexType {};
/// Python's ...: as many full slices as the other terms leave dimensions ("..." also works).
inline constexpr EllipsisIndexType Ellipsis{};

/// Python's start:stop:step. Open bounds are None; bounds are clamped to the dimension as in
/// Python. Throws ValueError for step <= 0 (PyTorch has no negative steps either).
class Slice {
 public:
  Slice(std::optional<int64_t> start = None, std::optional<int64_t> stop = None,  // NOLINT
        std::optional<int64_t> step = None)
      : start_(start.value_or(0)),
        stop_(stop.value_or(std::numeric_limits<int64_t>::max())),
        step_(step.value_or(1)) {
    EMBER_CHECK_T(ValueError, step_ > 0, "Slice: step must be greater than zero, got ", step_);
  }
  int64_t start() const { return start_; }
  int64_t stop() const { return stop_; }
  int64_t step() const { return step_; }

 private:
  int64_t start_, stop_, step_;
};

/// One term of an index: None, Ellipsis, an integer, a bool, a Slice, or a Tensor (int64/int32
/// indices, or a bool mask over as many dimensions as it has).
class TensorIndex {
 public:
  enum class Kind { kNone, kEllipsis, kInteger, kBoolean, kSlice, kTensor };

  TensorIndex(std::nullopt_t) : kind_(Kind::kNone) {}        // NOLINT
  TensorIndex(EllipsisIndexType) : kind_(Kind::kEllipsis) {}  // NOLINT
  /// "..." only; any other string is a ValueError.
  TensorIndex(const char* s) : kind_(Kind::kEllipsis) {  // NOLINT
    EMBER_CHECK_T(ValueError, s != nullptr && std::string_view(s) == "...",
                  "TensorIndex: expected \"...\" to be the only string index, got \"", s ? s : "(null)", "\"");
  }
  /// Integers select (removing the dimension); a bool adds a dimension of size 1 (true) or 0.
  template <std::integral T>
  TensorIndex(T v)  // NOLINT
      : kind_(std::is_same_v<T, bool> ? Kind::kBoolean : Kind::kInteger), integer_(static_cast<int64_t>(v)) {}
  TensorIndex(Slice s) : kind_(Kind::kSlice), slice_(s) {}                 // NOLINT
  TensorIndex(Tensor t) : kind_(Kind::kTensor), tensor_(std::move(t)) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_ellipsis() const { return kind_ == Kind::kEllipsis; }
  bool is_integer() const { return kind_ == Kind::kInteger; }
  bool is_boolean() const { return kind_ == Kind::kBoolean; }
  bool is_slice() const { return kind_ == Kind::kSlice; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  int64_t integer() const { return integer_; }
  bool boolean() const { return integer_ != 0; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  Kind kind_;
  int64_t integer_ = 0;
  Slice slice_;
  Tensor tensor_;
};

}  // namespace ember::indexing

namespace ember {
using indexing::TensorIndex;
}  // namespace ember
