// LibTorch's spellings of the loss and softmax functions, over nn::functional's own:
// F::CrossEntropyFuncOptions().ignore_index(0).reduction(kSum) builders (each a
// CrossEntropyOptions / NLLLossOptions, so they pass wherever those do), F::log_softmax and
// F::softmax with LogSoftmaxFuncOptions / SoftmaxFuncOptions (an int converts: F::log_softmax(x,
// 1)), the reduction constants kNone / kMean / kSum (torch::kMean), and the top-level
// nll_loss / cross_entropy of torch::nll_loss. Same meaning and errors as the functions they
// call. Stateless and thread-safe.
#pragma once
#include <cstdint>
#include <optional>

#include "autograd/ops.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "nn/functional.h"

namespace ember {

/// torch::kNone / kMean / kSum, for the options' reduction(...).
inline constexpr nn::functional::Reduction kNone = nn::functional::Reduction::None;
inline constexpr nn::functional::Reduction kMean = nn::functional::Reduction::Mean;
inline constexpr nn::functional::Reduction kSum = nn::functional::Reduction::Sum;

}  // namespace ember

namespace ember::nn {

namespace detail {
/// The chaining setters and getters a class-index loss's options share (weight, ignore_index,
/// reduction), over the functional options struct Base; Self is the options class.
template <class Self, class Base>
struct ClassLossOptionsSetters : Base {
  Self& weight(Tensor w) {
    Base::weight = std::move(w);
    return static_cast<Self&>(*this);
  }
  const Tensor& weight() const { return Base::weight; }
  Self& ignore_index(int64_t i) {
    Base::ignore_index = i;
    return static_cast<Self&>(*this);
  }
  int64_t ignore_index() const { return Base::ignore_index; }
  Self& reduction(functional::Reduction r) {
    Base::reduction = r;
    return static_cast<Self&>(*this);
  }
  functional::Reduction reduction() const { return Base::reduction; }
};
}  // namespace detail

/// LibTorch's CrossEntropyLossOptions: chaining setters and getters over CrossEntropyOptions.
struct CrossEntropyLossOptions
    : detail::ClassLossOptionsSetters<CrossEntropyLossOptions, functional::CrossEntropyOptions> {
  CrossEntropyLossOptions& label_smoothing(double s) {
    functional::CrossEntropyOptions::label_smoothing = s;
    return *this;
  }
  double label_smoothing() const { return functional::CrossEntropyOptions::label_smoothing; }
};

/// LibTorch's NLLLossOptions: chaining setters and getters over NLLLossOptions.
struct NLLLossOptions : detail::ClassLossOptionsSetters<NLLLossOptions, functional::NLLLossOptions> {};

}  // namespace ember::nn

namespace ember::nn::functional {

using CrossEntropyFuncOptions = nn::CrossEntropyLossOptions;
using NLLLossFuncOptions = nn::NLLLossOptions;

/// LibTorch's (Log)SoftmaxFuncOptions: the dim, and an optional dtype the input is cast to first.
class LogSoftmaxFuncOptions {
 public:
  LogSoftmaxFuncOptions(int64_t dim) : dim_(dim) {}  // NOLINT: implicit, F::log_softmax(x, 1)
  LogSoftmaxFuncOptions& dim(int64_t d) {
    dim_ = d;
    return *this;
  }
  int64_t dim() const { return dim_; }
  LogSoftmaxFuncOptions& dtype(std::optional<DType> t) {
    dtype_ = t;
    return *this;
  }
  std::optional<DType> dtype() const { return dtype_; }

 private:
  int64_t dim_;
  std::optional<DType> dtype_;
};
using SoftmaxFuncOptions = LogSoftmaxFuncOptions;

/// log(softmax(input)) along options.dim() (after a cast to options.dtype() when set).
inline Tensor log_softmax(const Tensor& input, const LogSoftmaxFuncOptions& options) {
  return ember::log_softmax(options.dtype() ? ember::to(input, *options.dtype()) : input, options.dim());
}
/// softmax(input) along options.dim() (after a cast to options.dtype() when set).
inline Tensor softmax(const Tensor& input, const SoftmaxFuncOptions& options) {
  return ember::softmax(options.dtype() ? ember::to(input, *options.dtype()) : input, options.dim());
}

}  // namespace ember::nn::functional

namespace ember {

/// torch::nll_loss: F::nll_loss with ATen's positional arguments.
inline Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                       nn::functional::Reduction reduction = kMean, int64_t ignore_index = -100) {
  return nn::functional::nll_loss(input, target, {.weight = weight, .ignore_index = ignore_index, .reduction = reduction});
}

/// torch::cross_entropy_loss (and F::cross_entropy) with ATen's positional arguments.
inline Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                            nn::functional::Reduction reduction = kMean, int64_t ignore_index = -100,
                            double label_smoothing = 0.0) {
  return nn::functional::cross_entropy(
      input, target,
      {.weight = weight, .ignore_index = ignore_index, .reduction = reduction, .label_smoothing = label_smoothing});
}
inline Tensor cross_entropy_loss(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                                 nn::functional::Reduction reduction = kMean, int64_t ignore_index = -100,
                                 double label_smoothing = 0.0) {
  return cross_entropy(input, target, weight, reduction, ignore_index, label_smoothing);
}

}  // namespace ember
