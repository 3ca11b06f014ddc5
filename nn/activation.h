// Activation modules without parameters: ReLU, Tanh, Sigmoid, GELU (PyTorch's nn.* of the same
// names and reprs). Stateless apart from GELU's approximation; safe to share between threads.
#pragma once
#include <string>

#include "nn/functional.h"
#include "nn/module.h"
#include "nn/module_holder.h"

namespace ember::nn {

class ReLUImpl : public Cloneable<ReLUImpl> {
 public:
  ReLUImpl() : Cloneable("ReLU") {}
  void reset() override {}
  Tensor forward(const Tensor& input) { return F::relu(input); }
  void pretty_print(std::ostream& os) const override { os << "ReLU()"; }
};
/// LibTorch's module holder of ReLUImpl (nn/module_holder.h).
EMBER_MODULE(ReLU);

class TanhImpl : public Cloneable<TanhImpl> {
 public:
  TanhImpl() : Cloneable("Tanh") {}
  void reset() override {}
  Tensor forward(const Tensor& input) { return F::tanh(input); }
  void pretty_print(std::ostream& os) const override { os << "Tanh()"; }
};
/// LibTorch's module holder of TanhImpl (nn/module_holder.h).
EMBER_MODULE(Tanh);

class SigmoidImpl : public Cloneable<SigmoidImpl> {
 public:
  SigmoidImpl() : Cloneable("Sigmoid") {}
  void reset() override {}
  Tensor forward(const Tensor& input) { return F::sigmoid(input); }
  void pretty_print(std::ostream& os) const override { os << "Sigmoid()"; }
};
/// LibTorch's module holder of SigmoidImpl (nn/module_holder.h).
EMBER_MODULE(Sigmoid);

class GELUImpl : public Cloneable<GELUImpl> {
 public:
  /// approximate: "none" (erf) or "tanh". Throws ValueError otherwise.
  explicit GELUImpl(std::string approximate = "none") : Cloneable("GELU"), approximate_(std::move(approximate)) {
    EMBER_CHECK_T(ValueError, approximate_ == "none" || approximate_ == "tanh",
                  "GELU: approximate argument must be either none or tanh, got '", approximate_, "'");
  }
  void reset() override {}
  Tensor forward(const Tensor& input) { return F::gelu(input, approximate_); }
  void pretty_print(std::ostream& os) const override { os << "GELU(approximate='" << approximate_ << "')"; }
  const std::string& approximate() const { return approximate_; }

 private:
  std::string approximate_;
};
/// LibTorch's module holder of GELUImpl (nn/module_holder.h).
EMBER_MODULE(GELU);

}  // namespace ember::nn
