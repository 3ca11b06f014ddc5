// gradcheck: compares analytic gradients (the engine) with central finite differences in
// float64, element by element, as torch.autograd.gradcheck does.
#pragma once
#include <functional>
#include <string>

#include "autograd/node.h"

namespace ember::autograd {

struct GradcheckResult {
  bool ok = true;
  std::string message;  // the first mismatch: input, element, analytic and numerical values
  explicit operator bool() const { return ok; }
};

/// `f` maps the inputs to one output tensor. Every input that requires grad must be float64.
GradcheckResult gradcheck(const std::function<Tensor(const TensorList&)>& f, const TensorList& inputs,
                          double eps = 1e-6, double atol = 1e-5, double rtol = 1e-3);

}  // namespace ember::autograd
