// Definitions of Tensor's LibTorch-style methods: each calls the differentiable free function
// of the same name (Note [Tensor methods] in core/tensor.h). Qualified calls (ember::view)
// because inside Tensor's members the method names hide the free functions.
#include "autograd/indexing.h"
#include "autograd/ops.h"
#include "core/ops/native.h"

namespace ember {
namespace {
// Runs an in-place free function on a second handle to the same TensorImpl, so the write and
// the new history land in the caller's tensor while the method stays const (as in LibTorch).
template <class F>
const Tensor& in_place(const Tensor& t, F&& f) {
  Tensor self = t;
  f(self);
  return t;
}
}  // namespace

Tensor Tensor::view(const IntList& sizes) const { return ember::view(*this, sizes); }
Tensor Tensor::reshape(const IntList& sizes) const { return ember::reshape(*this, sizes); }
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const { return ember::flatten(*this, start_dim, end_dim); }
Tensor Tensor::unsqueeze(int64_t dim) const { return ember::unsqueeze(*this, dim); }
Tensor Tensor::squeeze() const { return ember::squeeze(*this); }
Tensor Tensor::squeeze(int64_t dim) const { return ember::squeeze(*this, dim); }
Tensor Tensor::expand(const IntList& sizes) const { return ember::expand(*this, sizes); }
Tensor Tensor::expand_as(const Tensor& other) const { return ember::expand(*this, other.sizes()); }
Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const { return ember::transpose(*this, dim0, dim1); }
Tensor Tensor::t() const { return ember::t(*this); }
Tensor Tensor::permute(const IntList& dims) const { return ember::permute(*this, dims); }
Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  return ember::narrow(*this, dim, start, length);
}
Tensor Tensor::select(int64_t dim, int64_t index) const { return ember::select(*this, dim, index); }
Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  return ember::slice(*this, dim, start, end, step);
}
Tensor Tensor::operator[](int64_t index) const { return ember::select(*this, 0, index); }
Tensor Tensor::contiguous() const { return ember::contiguous(*this); }
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const { return ember::chunk(*this, chunks, dim); }
std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const { return ember::split(*this, split_size, dim); }

Tensor Tensor::to(Device device, bool non_blocking) const { return ember::to(*this, device, non_blocking); }
Tensor Tensor::to(DType dtype) const { return ember::to(*this, dtype); }
Tensor Tensor::to(Device device, DType dtype, bool non_blocking) const {
  return ember::to(*this, device, dtype, non_blocking);
}
Tensor Tensor::cpu() const { return ember::to(*this, Device::cpu()); }
Tensor Tensor::pin_memory() const { return ember::pin_memory(*this); }
Tensor Tensor::clone() const { return ember::clone(*this); }
Tensor Tensor::detach() const { return ember::detach(*this); }

Tensor Tensor::sum() const { return ember::sum(*this); }
Tensor Tensor::sum(const IntList& dims, bool keepdim) const { return ember::sum(*this, dims, keepdim); }
Tensor Tensor::sum(int64_t dim, bool keepdim) const { return ember::sum(*this, IntList{dim}, keepdim); }
Tensor Tensor::mean() const { return ember::mean(*this); }
Tensor Tensor::mean(const IntList& dims, bool keepdim) const { return ember::mean(*this, dims, keepdim); }
Tensor Tensor::mean(int64_t dim, bool keepdim) const { return ember::mean(*this, IntList{dim}, keepdim); }
Tensor Tensor::max() const { return ember::amax(*this); }
std::pair<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const { return ember::max(*this, dim, keepdim); }
Tensor Tensor::min() const { return ember::amin(*this); }
std::pair<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const { return ember::min(*this, dim, keepdim); }
Tensor Tensor::amax(const IntList& dims, bool keepdim) const { return ember::amax(*this, dims, keepdim); }
Tensor Tensor::argmax() const { return ember::argmax(ember::reshape(*this, {-1}), 0); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return ember::argmax(*this, dim, keepdim); }
Tensor Tensor::norm() const { return ember::norm(*this); }
Tensor Tensor::softmax(int64_t dim) const { return ember::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return ember::log_softmax(*this, dim); }

Tensor Tensor::add(const Tensor& other, double alpha) const { return ember::add(*this, other, alpha); }
Tensor Tensor::add(double other) const { return ember::add(*this, other); }
Tensor Tensor::sub(const Tensor& other, double alpha) const { return ember::sub(*this, other, alpha); }
Tensor Tensor::sub(double other) const { return ember::sub(*this, other); }
Tensor Tensor::mul(const Tensor& other) const { return ember::mul(*this, other); }
Tensor Tensor::mul(double other) const { return ember::mul(*this, other); }
Tensor Tensor::div(const Tensor& other) const { return ember::div(*this, other); }
Tensor Tensor::div(double other) const { return ember::div(*this, other); }
Tensor Tensor::pow(double exponent) const { return ember::pow(*this, exponent); }
Tensor Tensor::pow(const Tensor& exponent) const { return ember::pow(*this, exponent); }
Tensor Tensor::neg() const { return ember::neg(*this); }
Tensor Tensor::abs() const { return ember::abs(*this); }
Tensor Tensor::exp() const { return ember::exp(*this); }
Tensor Tensor::log() const { return ember::log(*this); }
Tensor Tensor::sqrt() const { return ember::sqrt(*this); }
Tensor Tensor::tanh() const { return ember::tanh(*this); }
Tensor Tensor::sigmoid() const { return ember::sigmoid(*this); }
Tensor Tensor::relu() const { return ember::relu(*this); }
Tensor Tensor::clamp(std::optional<double> min, std::optional<double> max) const {
  return ember::clamp(*this, min, max);
}
Tensor Tensor::matmul(const Tensor& other) const { return ember::matmul(*this, other); }
Tensor Tensor::mm(const Tensor& other) const { return ember::mm(*this, other); }
Tensor Tensor::masked_fill(const Tensor& mask, double value) const { return ember::masked_fill(*this, mask, value); }

Tensor Tensor::eq(const Tensor& other) const { return ember::eq(*this, other); }
Tensor Tensor::ne(const Tensor& other) const { return ember::ne(*this, other); }
Tensor Tensor::lt(const Tensor& other) const { return ember::lt(*this, other); }
Tensor Tensor::le(const Tensor& other) const { return ember::le(*this, other); }
Tensor Tensor::gt(const Tensor& other) const { return ember::gt(*this, other); }
Tensor Tensor::ge(const Tensor& other) const { return ember::ge(*this, other); }
// Comparisons record no history, so the number overloads use native's directly.
Tensor Tensor::eq(double other) const { return native::eq(*this, other); }
Tensor Tensor::ne(double other) const { return native::ne(*this, other); }
Tensor Tensor::lt(double other) const { return native::lt(*this, other); }
Tensor Tensor::le(double other) const { return native::le(*this, other); }
Tensor Tensor::gt(double other) const { return native::gt(*this, other); }
Tensor Tensor::ge(double other) const { return native::ge(*this, other); }

Tensor Tensor::index_select(int64_t dim, const Tensor& index) const { return ember::index_select(*this, dim, index); }
Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return ember::gather(*this, dim, index); }
Tensor Tensor::index(const std::vector<TensorIndex>& indices) const { return ember::index(*this, indices); }
const Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, const Tensor& value, bool accumulate) const {
  return in_place(*this, [&](Tensor& s) { ember::index_put_(s, indices, value, accumulate); });
}
const Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, double value) const {
  return in_place(*this, [&](Tensor& s) { ember::index_put_(s, indices, value); });
}

const Tensor& Tensor::add_(const Tensor& other, double alpha) const {
  return in_place(*this, [&](Tensor& s) { ember::add_(s, other, alpha); });
}
const Tensor& Tensor::add_(double other) const {
  return in_place(*this, [&](Tensor& s) { ember::add_(s, scalar_tensor(other, TensorOptions(dtype()).device(device()))); });
}
const Tensor& Tensor::sub_(const Tensor& other, double alpha) const {
  return in_place(*this, [&](Tensor& s) { ember::add_(s, other, -alpha); });
}
const Tensor& Tensor::mul_(const Tensor& other) const {
  return in_place(*this, [&](Tensor& s) { ember::mul_(s, other); });
}
const Tensor& Tensor::mul_(double other) const {
  return in_place(*this, [&](Tensor& s) { ember::mul_(s, other); });
}
const Tensor& Tensor::zero_() const {
  return in_place(*this, [](Tensor& s) { ember::zero_(s); });
}
const Tensor& Tensor::fill_(double value) const {
  return in_place(*this, [&](Tensor& s) { ember::fill_(s, value); });
}
const Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) const {
  return in_place(*this, [&](Tensor& s) { ember::copy_(s, src, non_blocking); });
}
const Tensor& Tensor::masked_fill_(const Tensor& mask, double value) const {
  return in_place(*this, [&](Tensor& s) { ember::masked_fill_(s, mask, value); });
}

}  // namespace ember
