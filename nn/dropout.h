// Dropout: zeroes elements with probability p while training and scales the survivors by
// 1 / (1 - p); the identity in eval mode. PyTorch's nn.Dropout. Draws from the default CPU
// generator of the input's device unless a Generator is set. Not thread-safe (a Module).
#pragma once
#include "core/generator.h"
#include "nn/module.h"
#include "nn/module_holder.h"

namespace ember::nn {

class DropoutImpl : public Cloneable<DropoutImpl> {
 public:
  /// Throws ValueError unless 0 <= p <= 1.
  explicit DropoutImpl(double p = 0.5);

  void reset() override {}
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& os) const override;

  double p() const { return p_; }
  /// Draw masks from `gen` (not owned; must outlive the module) instead of the default generator.
  void set_generator(Generator* gen) { gen_ = gen; }

 private:
  double p_;
  Generator* gen_ = nullptr;
};
/// LibTorch's module holder of DropoutImpl (nn/module_holder.h).
EMBER_MODULE(Dropout);

}  // namespace ember::nn
