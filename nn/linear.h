// Linear: y = x @ weight^T + bias, PyTorch's nn.Linear (parameters "weight" [out, in] and
// "bias" [out]; kaiming_uniform_(a = sqrt(5)) weight, U(-1/sqrt(in), 1/sqrt(in)) bias).
// Not thread-safe (a Module); clones may run concurrently.
#pragma once
#include "nn/module.h"
#include "nn/module_holder.h"

namespace ember::nn {

class LinearImpl : public Cloneable<LinearImpl> {
 public:
  /// Throws ValueError for negative sizes.
  LinearImpl(int64_t in_features, int64_t out_features, bool bias = true);

  void reset() override;
  /// Re-draws weight and bias with the default initialization.
  void reset_parameters();
  /// x [..., in_features] -> [..., out_features].
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& os) const override;

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }

  Tensor weight;
  Tensor bias;  // undefined when built with bias = false

 private:
  int64_t in_features_;
  int64_t out_features_;
  bool has_bias_;
};
/// LibTorch's module holder of LinearImpl (nn/module_holder.h).
EMBER_MODULE(Linear);

}  // namespace ember::nn
