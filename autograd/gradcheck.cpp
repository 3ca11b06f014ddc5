#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/ops.h"
#include "core/ops/native.h"

namespace ember::autograd {

GradcheckResult gradcheck(const std::function<Tensor(const TensorList&)>& f, const TensorList& inputs, double eps,
                          double atol, double rtol) {
  TensorList leaves;
  std::vector<size_t> diff;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    if (in.defined() && in.requires_grad()) {
      EMBER_CHECK_T(TypeError, in.dtype() == kFloat64, "gradcheck: input ", i, " requires grad but is ", in.dtype(),
                    "; gradcheck needs float64 inputs");
      Tensor leaf = native::clone(in);
      leaf.requires_grad_(true);
      leaves.push_back(leaf);
      diff.push_back(i);
    } else {
      leaves.push_back(in);
    }
  }
  Tensor out = f(leaves);
  EMBER_CHECK(out.defined() && out.is_floating_point(), "gradcheck: f must return a floating-point tensor");
  Tensor out_flat = native::contiguous(native::to(out, kFloat64));
  const int64_t n_out = out.numel();
  // Analytic: one vector-Jacobian product per output element.
  std::vector<std::vector<double>> analytic(diff.size());
  for (size_t k = 0; k < diff.size(); ++k) analytic[k].assign(static_cast<size_t>(leaves[diff[k]].numel() * n_out), 0.0);
  TensorList diff_leaves;
  for (auto i : diff) diff_leaves.push_back(leaves[i]);
  for (int64_t o = 0; o < n_out; ++o) {
    Tensor go = zeros(out.sizes(), TensorOptions(out.dtype()).device(out.device()));
    Tensor one = native::narrow(native::reshape(go, {-1}), 0, o, 1);
    native::fill_(one, 1.0);
    if (!out.requires_grad()) break;
    TensorList g = grad({out}, diff_leaves, {go}, /*retain_graph=*/true, /*allow_unused=*/true);
    for (size_t k = 0; k < diff.size(); ++k) {
      if (!g[k].defined()) continue;
      auto v = g[k].to_vector<double>();
      for (size_t e = 0; e < v.size(); ++e) analytic[k][e * static_cast<size_t>(n_out) + static_cast<size_t>(o)] = v[e];
    }
  }
  // Numerical: central differences, perturbing each element of each input in place.
  NoGradGuard no_grad;
  for (size_t k = 0; k < diff.size(); ++k) {
    Tensor x = leaves[diff[k]];
    double* p = x.data_ptr<double>();
    for (int64_t e = 0; e < x.numel(); ++e) {
      double orig = p[e];
      p[e] = orig + eps;
      auto plus = native::to(f(leaves), kFloat64).to_vector<double>();
      p[e] = orig - eps;
      auto minus = native::to(f(leaves), kFloat64).to_vector<double>();
      p[e] = orig;
      for (int64_t o = 0; o < n_out; ++o) {
        double num = (plus[o] - minus[o]) / (2 * eps);
        double ana = analytic[k][static_cast<size_t>(e * n_out + o)];
        if (!(std::abs(num - ana) <= atol + rtol * std::abs(num))) {
          std::ostringstream os;
          os << "gradcheck: Jacobian mismatch for output " << o << " with respect to input " << diff[k] << ", element "
             << e << ": numerical " << num << ", analytical " << ana;
          return {false, os.str()};
        }
      }
    }
  }
  return {true, ""};
}

}  // namespace ember::autograd
