#include "core/ops/factory.h"

#include <cmath>
#include <cstring>

#include "core/detail/checked_math.h"
#include "core/ops/native.h"

namespace ember {

namespace {
// An uninitialized tensor for the factory `op`. See Note [Checked shape arithmetic]: the shape is
// checked here, and the allocator throws OutOfMemoryError for what is too large to exist.
Tensor allocate(const IntList& sizes, const TensorOptions& options, const char* op) {
  for (auto s : sizes) {
    EMBER_CHECK_T(ValueError, s >= 0, op, ": trying to create tensor with negative dimension ", s, ": ", sizes);
  }
  const uint64_t num_bytes = detail::checked_nbytes(sizes, element_size(options.dtype_), op);
  Storage storage(static_cast<size_t>(num_bytes), options.device_);
  return make_tensor(std::move(storage), sizes, contiguous_strides(sizes, op), 0, options.dtype_, op);
}
}  // namespace

Tensor empty(const IntList& sizes, TensorOptions options) {
  Tensor t = allocate(sizes, options, "empty");
  if (options.requires_grad_) t.requires_grad_(true);
  return t;
}

Tensor full(const IntList& sizes, double value, TensorOptions options) {
  bool rg = options.requires_grad_;
  Tensor t = allocate(sizes, options, "full");
  native::fill_(t, value);
  t.impl()->version->version.store(0);  // a new tensor starts at version 0, as in PyTorch
  if (rg) t.requires_grad_(true);
  return t;
}
Tensor zeros(const IntList& sizes, TensorOptions options) {
  bool rg = options.requires_grad_;
  Tensor t = allocate(sizes, options, "zeros");
  if (t.device().is_cpu()) {
    if (t.nbytes() > 0) std::memset(t.raw_data(), 0, t.nbytes());
  } else {
    native::zero_(t);
  }
  if (rg) t.requires_grad_(true);
  return t;
}
Tensor ones(const IntList& sizes, TensorOptions options) { return full(sizes, 1.0, options); }

namespace {
TensorOptions like(const Tensor& t) { return TensorOptions(t.dtype()).device(t.device()); }
}  // namespace
Tensor empty_like(const Tensor& t) { return empty(t.sizes(), like(t)); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), like(t)); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), like(t)); }
Tensor full_like(const Tensor& t, double value) { return full(t.sizes(), value, like(t)); }

Tensor arange(int64_t end, TensorOptions options) { return arange(0, static_cast<double>(end), 1, options); }

Tensor arange(double start, double end, double step, TensorOptions options) {
  EMBER_CHECK_T(ValueError, step != 0, "arange: step must be nonzero");
  EMBER_CHECK_T(ValueError, (step > 0 && end >= start) || (step < 0 && end <= start),
                "arange: upper bound and larger bound inconsistent with step sign (start=", start, ", end=", end,
                ", step=", step, ")");
  const double count = std::ceil((end - start) / step);
  EMBER_CHECK_T(ValueError, std::isfinite(count) && count < 9.2e18, "arange: the number of elements (start=", start,
                ", end=", end, ", step=", step, ") is not a finite count that fits in int64");
  int64_t n = static_cast<int64_t>(count);
  Tensor host = empty({n}, TensorOptions(options.dtype_));
  EMBER_DISPATCH_ALL(options.dtype_, "arange", [&] {
    auto* p = host.data_ptr<scalar_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = from_double<scalar_t>(start + step * static_cast<double>(i));
  });
  Tensor t = native::to(host, options.device_);
  if (options.requires_grad_) t.requires_grad_(true);
  return t;
}

Tensor eye(int64_t n, TensorOptions options) {
  EMBER_CHECK_T(ValueError, n >= 0, "eye: n must be greater or equal to 0, got ", n);
  Tensor host = zeros({n, n}, TensorOptions(options.dtype_));
  EMBER_DISPATCH_ALL(options.dtype_, "eye", [&] {
    auto* p = host.data_ptr<scalar_t>();
    for (int64_t i = 0; i < n; ++i) p[i * n + i] = static_cast<scalar_t>(1.0f);
  });
  Tensor t = native::to(host, options.device_);
  if (options.requires_grad_) t.requires_grad_(true);
  return t;
}

Tensor scalar_tensor(double value, TensorOptions options) { return full({}, value, options); }

template <typename T>
Tensor from_vector(const std::vector<T>& values, IntList sizes, Device device) {
  if (sizes.empty()) sizes = {static_cast<int64_t>(values.size())};
  const int64_t n = numel_of(sizes, "from_vector");
  EMBER_CHECK_T(ValueError, n == static_cast<int64_t>(values.size()), "from_vector: shape ", sizes, " needs ", n,
                " values, got ", values.size());
  Tensor host = empty(sizes, TensorOptions(dtype_of<T>));
  T* p = host.data_ptr<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return native::to(host, device);
}
template Tensor from_vector<float>(const std::vector<float>&, IntList, Device);
template Tensor from_vector<double>(const std::vector<double>&, IntList, Device);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, IntList, Device);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, IntList, Device);
template <>
Tensor from_vector<bool>(const std::vector<bool>& values, IntList sizes, Device device) {
  if (sizes.empty()) sizes = {static_cast<int64_t>(values.size())};
  const int64_t n = numel_of(sizes, "from_vector");
  EMBER_CHECK_T(ValueError, n == static_cast<int64_t>(values.size()), "from_vector: shape ", sizes, " needs ", n,
                " values, got ", values.size());
  Tensor host = empty(sizes, TensorOptions(kBool));
  bool* p = host.data_ptr<bool>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return native::to(host, device);
}

namespace {
// The host tensor `values` converted to the options' device and dtype (T's dtype when none is given).
template <typename T>
Tensor finish_tensor(const std::vector<T>& values, IntList sizes, TensorOptions options, DType inferred) {
  Tensor t = native::to(from_vector(values, std::move(sizes)), options.device_,
                        options.has_dtype_ ? options.dtype_ : inferred);
  if (options.requires_grad_) t.requires_grad_(true);
  return t;
}
}  // namespace

Tensor tensor(std::initializer_list<double> values, IntList sizes, TensorOptions options) {
  return finish_tensor(std::vector<double>(values), std::move(sizes), options, kFloat32);
}

Tensor tensor(std::initializer_list<double> values, TensorOptions options) { return tensor(values, {}, options); }

Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, TensorOptions options) {
  std::vector<double> v;
  const size_t cols = rows.size() == 0 ? 0 : rows.begin()->size();
  for (const auto& r : rows) {
    EMBER_CHECK_T(ValueError, r.size() == cols, "tensor: expected rows of equal length ", cols, ", got a row of ",
                  r.size());
    v.insert(v.end(), r.begin(), r.end());
  }
  return finish_tensor(v, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(cols)}, options, kFloat32);
}

template <typename T>
Tensor tensor(const std::vector<T>& values, TensorOptions options) {
  return finish_tensor(values, {}, options, dtype_of<T>);
}
template Tensor tensor<float>(const std::vector<float>&, TensorOptions);
template Tensor tensor<double>(const std::vector<double>&, TensorOptions);
template Tensor tensor<int64_t>(const std::vector<int64_t>&, TensorOptions);
template Tensor tensor<int32_t>(const std::vector<int32_t>&, TensorOptions);
template Tensor tensor<bool>(const std::vector<bool>&, TensorOptions);

Tensor from_blob(void* data, const IntList& sizes, DType dtype, std::function<void(void*)> deleter, Device device) {
  const uint64_t n = detail::checked_nbytes(sizes, element_size(dtype), "from_blob");
  Storage s = Storage::from_external(data, static_cast<size_t>(n), device, std::move(deleter));
  return make_tensor(std::move(s), sizes, contiguous_strides(sizes, "from_blob"), 0, dtype, "from_blob");
}

}  // namespace ember
