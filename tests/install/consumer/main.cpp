// A user program built against an installed ember: tensors, autograd, a module.
#include <cstdio>

#include "ember/ember.h"

int main() {
  using namespace ember;
  Tensor x = tensor({1, 2, 3});
  x.requires_grad_(true);
  Tensor y = sum(mul(mul(x, x), 3.0));
  y.backward();
  std::printf("grad=%g\n", x.grad().to_vector<float>()[0]);  // 6 * x[0] = 6
  return 0;
}
