// LayerNorm: normalization over the trailing dims normalized_shape, PyTorch's nn.LayerNorm
// (parameters "weight" = 1 and "bias" = 0 of shape normalized_shape when elementwise_affine).
// Not thread-safe (a Module); clones may run concurrently.
#pragma once
#include "nn/module.h"
#include "nn/module_holder.h"

namespace ember::nn {

class LayerNormImpl : public Cloneable<LayerNormImpl> {
 public:
  /// Throws ValueError for an empty normalized_shape.
  explicit LayerNormImpl(IntList normalized_shape, double eps = 1e-5, bool elementwise_affine = true);

  void reset() override;
  void reset_parameters();
  /// input [*, normalized_shape...] -> same shape.
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& os) const override;

  const IntList& normalized_shape() const { return normalized_shape_; }
  double eps() const { return eps_; }

  Tensor weight;  // undefined without elementwise_affine
  Tensor bias;

 private:
  IntList normalized_shape_;
  double eps_;
  bool elementwise_affine_;
};
/// LibTorch's module holder of LayerNormImpl (nn/module_holder.h).
EMBER_MODULE(LayerNorm);

}  // namespace ember::nn
