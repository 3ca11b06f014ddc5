// nn::init: in-place parameter initializers with PyTorch's names, formulas and defaults
// (torch.nn.init). Every function runs under NoGradGuard, returns its argument, and does
// nothing while a detail::SkipInitGuard is alive (clone() rebuilds a module without drawing
// random numbers). A null Generator means the default generator of the tensor's device.
// Thread-safe as far as the generator is (it locks); the tensor itself is not synchronized.
#pragma once
#include <optional>
#include <string>
#include <utility>

#include "core/generator.h"
#include "core/tensor.h"

namespace ember::nn::init {

/// Recommended gain for a nonlinearity: "linear", "conv1d".."conv3d", "conv_transpose1d".."3d",
/// "sigmoid" -> 1; "tanh" -> 5/3; "relu" -> sqrt(2); "leaky_relu" -> sqrt(2 / (1 + slope^2))
/// (slope = param, default 0.01); "selu" -> 3/4. Throws ValueError for anything else.
double calculate_gain(const std::string& nonlinearity, std::optional<double> param = std::nullopt);

/// (fan_in, fan_out) of a weight [out, in, *receptive]: in * receptive, out * receptive.
/// Throws ValueError for tensors with fewer than 2 dimensions.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor);

/// U(a, b).
Tensor& uniform_(Tensor& tensor, double a = 0.0, double b = 1.0, Generator* gen = nullptr);
/// N(mean, std^2).
Tensor& normal_(Tensor& tensor, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
Tensor& constant_(Tensor& tensor, double value);
Tensor& zeros_(Tensor& tensor);
Tensor& ones_(Tensor& tensor);
/// Identity matrix for a 2-D tensor (extra columns/rows zero). Throws ValueError otherwise.
Tensor& eye_(Tensor& tensor);

/// Glorot: U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& tensor, double gain = 1.0, Generator* gen = nullptr);
/// Glorot: N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor& xavier_normal_(Tensor& tensor, double gain = 1.0, Generator* gen = nullptr);

/// mode: "fan_in" (default) or "fan_out"; nonlinearity as calculate_gain, `a` its slope.
/// He: U(-bound, bound), bound = gain * sqrt(3 / fan).
Tensor& kaiming_uniform_(Tensor& tensor, double a = 0.0, const std::string& mode = "fan_in",
                         const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);
/// He: N(0, std^2), std = gain / sqrt(fan).
Tensor& kaiming_normal_(Tensor& tensor, double a = 0.0, const std::string& mode = "fan_in",
                        const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);

/// (Semi-)orthogonal matrix times gain, from the QR decomposition of a N(0, 1) matrix with the
/// signs of R's diagonal folded into Q (Saxe et al. 2013). Tensors with more than 2 dimensions
/// are flattened to [size(0), numel / size(0)]. Throws ValueError for fewer than 2 dimensions.
Tensor& orthogonal_(Tensor& tensor, double gain = 1.0, Generator* gen = nullptr);

}  // namespace ember::nn::init
