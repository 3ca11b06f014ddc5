#include "nn/init.h"

#include <cmath>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "nn/module.h"

namespace ember::nn::init {

namespace {
bool skip() { return nn::detail::SkipInitGuard::active(); }

int64_t fan_for(const Tensor& t, const std::string& mode) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  if (mode == "fan_in") return fan_in;
  if (mode == "fan_out") return fan_out;
  EMBER_THROW(ValueError, "Mode ", mode, " not supported, please use one of fan_in, fan_out");
}

double kaiming_std(const Tensor& t, double a, const std::string& mode, const std::string& nonlinearity) {
  int64_t fan = fan_for(t, mode);
  EMBER_CHECK_T(ValueError, fan > 0, "kaiming init: cannot initialize an empty tensor (fan is 0, shape ",
                t.sizes(), ")");
  return calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan));
}
}  // namespace

double calculate_gain(const std::string& nonlinearity, std::optional<double> param) {
  static const char* kUnity[] = {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                                 "conv_transpose3d", "sigmoid"};
  for (const char* n : kUnity) {
    if (nonlinearity == n) return 1.0;
  }
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") {
    double slope = param.value_or(0.01);
    return std::sqrt(2.0 / (1.0 + slope * slope));
  }
  if (nonlinearity == "selu") return 3.0 / 4.0;
  EMBER_THROW(ValueError, "Unsupported nonlinearity ", nonlinearity);
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor) {
  EMBER_CHECK_T(ValueError, tensor.dim() >= 2,
                "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions (got shape ",
                tensor.sizes(), ")");
  int64_t receptive = 1;
  for (int64_t d = 2; d < tensor.dim(); ++d) receptive *= tensor.sizes()[static_cast<size_t>(d)];
  return {tensor.sizes()[1] * receptive, tensor.sizes()[0] * receptive};
}

Tensor& uniform_(Tensor& tensor, double a, double b, Generator* gen) {
  if (skip()) return tensor;
  NoGradGuard no_grad;
  return ember::uniform_(tensor, a, b, gen);
}

Tensor& normal_(Tensor& tensor, double mean, double std, Generator* gen) {
  if (skip()) return tensor;
  NoGradGuard no_grad;
  return ember::normal_(tensor, mean, std, gen);
}

Tensor& constant_(Tensor& tensor, double value) {
  if (skip()) return tensor;
  NoGradGuard no_grad;
  return native::fill_(tensor, value);
}

Tensor& zeros_(Tensor& tensor) { return constant_(tensor, 0.0); }
Tensor& ones_(Tensor& tensor) { return constant_(tensor, 1.0); }

Tensor& eye_(Tensor& tensor) {
  EMBER_CHECK_T(ValueError, tensor.dim() == 2, "eye_: only tensors with 2 dimensions are supported, got shape ",
                tensor.sizes());
  if (skip()) return tensor;
  NoGradGuard no_grad;
  int64_t n = tensor.sizes()[0], m = tensor.sizes()[1];
  std::vector<double> e(static_cast<size_t>(n * m), 0.0);
  for (int64_t i = 0; i < std::min(n, m); ++i) e[static_cast<size_t>(i * m + i)] = 1.0;
  return native::copy_(tensor, from_vector<double>(e, {n, m}));
}

Tensor& xavier_uniform_(Tensor& tensor, double gain, Generator* gen) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  double std = gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  double a = std::sqrt(3.0) * std;
  return init::uniform_(tensor, -a, a, gen);
}

Tensor& xavier_normal_(Tensor& tensor, double gain, Generator* gen) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  double std = gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  return init::normal_(tensor, 0.0, std, gen);
}

Tensor& kaiming_uniform_(Tensor& tensor, double a, const std::string& mode, const std::string& nonlinearity,
                         Generator* gen) {
  if (skip() || tensor.numel() == 0) return tensor;
  double bound = std::sqrt(3.0) * kaiming_std(tensor, a, mode, nonlinearity);
  return init::uniform_(tensor, -bound, bound, gen);
}

Tensor& kaiming_normal_(Tensor& tensor, double a, const std::string& mode, const std::string& nonlinearity,
                        Generator* gen) {
  if (skip() || tensor.numel() == 0) return tensor;
  return init::normal_(tensor, 0.0, kaiming_std(tensor, a, mode, nonlinearity), gen);
}

Tensor& orthogonal_(Tensor& tensor, double gain, Generator* gen) {
  EMBER_CHECK_T(ValueError, tensor.dim() >= 2, "Only tensors with 2 or more dimensions are supported (got shape ",
                tensor.sizes(), ")");
  if (skip() || tensor.numel() == 0) return tensor;
  NoGradGuard no_grad;
  const int64_t rows = tensor.sizes()[0];
  const int64_t cols = tensor.numel() / rows;
  Tensor flat = empty({rows, cols}, TensorOptions(tensor.dtype()).device(tensor.device()));
  ember::normal_(flat, 0.0, 1.0, gen);
  // Work on the tall orientation A [m, n], m >= n, column-major in `a` for cache-friendly columns.
  const bool transposed = rows < cols;
  const int64_t m = transposed ? cols : rows, n = transposed ? rows : cols;
  std::vector<double> src = flat.to_vector<double>();
  std::vector<double> a(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      double v = src[static_cast<size_t>(i * cols + j)];
      if (transposed) {
        a[static_cast<size_t>(i * m + j)] = v;  // column i of A = row i of flat
      } else {
        a[static_cast<size_t>(j * m + i)] = v;
      }
    }
  }
  // Modified Gram-Schmidt with one re-orthogonalization pass: Q's columns with R's diagonal
  // positive, which is exactly Q * sign(diag(R)) of a Householder QR.
  for (int64_t j = 0; j < n; ++j) {
    double* qj = &a[static_cast<size_t>(j * m)];
    for (int pass = 0; pass < 2; ++pass) {
      for (int64_t k = 0; k < j; ++k) {
        const double* qk = &a[static_cast<size_t>(k * m)];
        double dot = 0.0;
        for (int64_t i = 0; i < m; ++i) dot += qk[i] * qj[i];
        for (int64_t i = 0; i < m; ++i) qj[i] -= dot * qk[i];
      }
    }
    double norm = 0.0;
    for (int64_t i = 0; i < m; ++i) norm += qj[i] * qj[i];
    norm = std::sqrt(norm);
    EMBER_INTERNAL_ASSERT(norm > 0.0, "orthogonal_: rank-deficient random matrix");
    for (int64_t i = 0; i < m; ++i) qj[i] /= norm;
  }
  std::vector<double> out(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      double v = transposed ? a[static_cast<size_t>(i * m + j)] : a[static_cast<size_t>(j * m + i)];
      out[static_cast<size_t>(i * cols + j)] = v * gain;
    }
  }
  Tensor q = native::reshape(from_vector(out, {rows, cols}), tensor.sizes());
  return native::copy_(tensor, q);
}

}  // namespace ember::nn::init
