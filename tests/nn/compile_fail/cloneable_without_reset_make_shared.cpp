// Must NOT compile: a Cloneable that does not override reset(). cloneable_without_reset_message_test checks
// that the compiler's first error is Cloneable's one-line reason, not pages of make_shared.
#include "ember/ember.h"
using namespace ember;

struct Net : nn::Cloneable<Net> {
  Net() { fc = register_module("fc", nn::Linear(4, 2)); }
  Tensor forward(const Tensor& x) { return fc(x); }
  nn::Linear fc{nullptr};
};

int main() {
  auto net = std::make_shared<Net>();
  return net->forward(randn({3, 4})).size(0) == 3 ? 0 : 1;
}
