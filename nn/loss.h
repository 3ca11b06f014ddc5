// Loss modules wrapping nn::functional's losses (PyTorch's nn.CrossEntropyLoss, NLLLoss,
// MSELoss, BCEWithLogitsLoss). Class weights and pos_weight are buffers ("weight",
// "pos_weight"), so they move with to() and appear in state_dict as in PyTorch. Not
// thread-safe (Modules).
#pragma once
#include "nn/functional.h"
#include "nn/module.h"
#include "nn/module_holder.h"

namespace ember::nn {

class CrossEntropyLossImpl : public Cloneable<CrossEntropyLossImpl> {
 public:
  explicit CrossEntropyLossImpl(F::CrossEntropyOptions options = {}) : Cloneable("CrossEntropyLoss"), options_(std::move(options)) {
    check_label_smoothing();
    reset();
  }
  void reset() override {
    if (options_.weight.defined()) options_.weight = register_buffer("weight", native_clone(options_.weight));
  }
  Tensor forward(const Tensor& input, const Tensor& target) { return F::cross_entropy(input, target, options_); }
  void pretty_print(std::ostream& os) const override { os << "CrossEntropyLoss()"; }
  const F::CrossEntropyOptions& options() const { return options_; }

 private:
  void check_label_smoothing() const {
    EMBER_CHECK_T(ValueError, options_.label_smoothing >= 0.0 && options_.label_smoothing <= 1.0,
                  "CrossEntropyLoss: label_smoothing must be between 0.0 and 1.0. Got: ", options_.label_smoothing);
  }
  static Tensor native_clone(const Tensor& t) { return ember::detach(ember::clone(t)); }
  F::CrossEntropyOptions options_;
};
/// LibTorch's module holder of CrossEntropyLossImpl (nn/module_holder.h).
EMBER_MODULE(CrossEntropyLoss);

class NLLLossImpl : public Cloneable<NLLLossImpl> {
 public:
  explicit NLLLossImpl(F::NLLLossOptions options = {}) : Cloneable("NLLLoss"), options_(std::move(options)) { reset(); }
  void reset() override {
    if (options_.weight.defined()) options_.weight = register_buffer("weight", ember::detach(ember::clone(options_.weight)));
  }
  Tensor forward(const Tensor& input, const Tensor& target) { return F::nll_loss(input, target, options_); }
  void pretty_print(std::ostream& os) const override { os << "NLLLoss()"; }
  const F::NLLLossOptions& options() const { return options_; }

 private:
  F::NLLLossOptions options_;
};
/// LibTorch's module holder of NLLLossImpl (nn/module_holder.h).
EMBER_MODULE(NLLLoss);

class MSELossImpl : public Cloneable<MSELossImpl> {
 public:
  explicit MSELossImpl(F::Reduction reduction = F::Reduction::Mean) : Cloneable("MSELoss"), reduction_(reduction) {}
  void reset() override {}
  Tensor forward(const Tensor& input, const Tensor& target) { return F::mse_loss(input, target, reduction_); }
  void pretty_print(std::ostream& os) const override { os << "MSELoss()"; }

 private:
  F::Reduction reduction_;
};
/// LibTorch's module holder of MSELossImpl (nn/module_holder.h).
EMBER_MODULE(MSELoss);

class BCEWithLogitsLossImpl : public Cloneable<BCEWithLogitsLossImpl> {
 public:
  explicit BCEWithLogitsLossImpl(F::BCEWithLogitsOptions options = {})
      : Cloneable("BCEWithLogitsLoss"), options_(std::move(options)) {
    reset();
  }
  void reset() override {
    if (options_.weight.defined()) options_.weight = register_buffer("weight", ember::detach(ember::clone(options_.weight)));
    if (options_.pos_weight.defined()) {
      options_.pos_weight = register_buffer("pos_weight", ember::detach(ember::clone(options_.pos_weight)));
    }
  }
  Tensor forward(const Tensor& input, const Tensor& target) {
    return F::binary_cross_entropy_with_logits(input, target, options_);
  }
  void pretty_print(std::ostream& os) const override { os << "BCEWithLogitsLoss()"; }
  const F::BCEWithLogitsOptions& options() const { return options_; }

 private:
  F::BCEWithLogitsOptions options_;
};
/// LibTorch's module holder of BCEWithLogitsLossImpl (nn/module_holder.h).
EMBER_MODULE(BCEWithLogitsLoss);

}  // namespace ember::nn
