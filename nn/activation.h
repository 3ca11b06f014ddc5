// Activation modules without parameters: ReLU, Tanh, Sigmoid, GELU (PyTorch's nn.* of the same
// names and reprs). Stateless apart from GELU's approximation; safe to share between threads.
#pragma once
#include <string>

#include "nn/functional.h"
#include "nn/module.h"

namespace ember::nn {

class ReLU : public Cloneable<ReLU> {
 public:
  ReLU() : Cloneable("ReLU") {}
  void reset() override {}
  Tensor forward(const Tensor& input) { return F::relu(input); }
  void pretty_print(std::ostream& os) const override { os << "ReLU()"; }
};

class Tanh : public Cloneable<Tanh> {
 public:
  Tanh() : Cloneable("Tanh") {}
  void reset() override {}
  Tensor forward(const Tensor& input) { return F::tanh(input); }
  void pretty_print(std::ostream& os) const override { os << "Tanh()"; }
};

class Sigmoid : public Cloneable<Sigmoid> {
 public:
  Sigmoid() : Cloneable("Sigmoid") {}
  void reset() override {}
  Tensor forward(const Tensor& input) { return F::sigmoid(input); }
  void pretty_print(std::ostream& os) const override { os << "Sigmoid()"; }
};

class GELU : public Cloneable<GELU> {
 public:
  /// approximate: "none" (erf) or "tanh". Throws ValueError otherwise.
  explicit GELU(std::string approximate = "none") : Cloneable("GELU"), approximate_(std::move(approximate)) {
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

}  // namespace ember::nn
