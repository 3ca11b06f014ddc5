// Must not compile: a Cloneable that does not override reset(). The build test
// cloneable_without_reset_test expects the one-line static_assert of nn/module.h, not a cascade
// from inside the standard library.
#include "nn/module.h"

struct NoReset : ember::nn::Cloneable<NoReset> {
  ember::Tensor forward(const ember::Tensor& x) { return x; }
};

int main() {
  std::shared_ptr<ember::nn::Module> m;
  const ember::nn::Cloneable<NoReset>* c = nullptr;
  if (c) m = c->clone();
  return m ? 1 : 0;
}
