// PyTorch-style printing: tensor([[1.0000, 2.0000], ...], dtype=..., device=..., grad_fn=<...>)
#include <iomanip>
#include <sstream>

#include "core/ops/native.h"
#include "core/tensor.h"

namespace ember {

namespace autograd {
// Implemented by ember_autograd; a weak default keeps core usable on its own.
__attribute__((weak)) std::string node_name(const Node*) { return "Node"; }
}  // namespace autograd

namespace {
void print_rec(std::ostringstream& os, const std::vector<double>& v, const IntList& sizes, size_t dim, int64_t& pos,
               bool floating, int indent) {
  if (dim == sizes.size()) {
    double x = v[static_cast<size_t>(pos++)];
    if (floating) {
      os << std::fixed << std::setprecision(4) << x;
    } else {
      os << static_cast<int64_t>(x);
    }
    return;
  }
  os << '[';
  const int64_t n = sizes[dim];
  const int64_t kEdge = 3;
  for (int64_t i = 0; i < n; ++i) {
    if (n > 2 * kEdge + 1 && i == kEdge) {
      os << "...";
      int64_t skip = n - 2 * kEdge;
      int64_t per = 1;
      for (size_t d = dim + 1; d < sizes.size(); ++d) per *= sizes[d];
      pos += skip * per;
      i += skip - 1;
      os << (dim + 1 == sizes.size() ? ", " : ",\n" + std::string(indent + 1, ' '));
      continue;
    }
    print_rec(os, v, sizes, dim + 1, pos, floating, indent + 1);
    if (i + 1 < n) os << (dim + 1 == sizes.size() ? ", " : ",\n" + std::string(indent + 1, ' '));
  }
  os << ']';
}
}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream os;
  os << "tensor(";
  std::vector<double> v = to_vector<double>();
  int64_t pos = 0;
  print_rec(os, v, sizes(), 0, pos, is_floating_point(), 7);
  if (dtype() != kFloat32 && dtype() != kInt64) os << ", dtype=" << dtype();
  if (!device().is_cpu() || device().index != 0) os << ", device='" << device() << "'";
  if (grad_fn()) {
    os << ", grad_fn=<" << autograd::node_name(grad_fn().get()) << ">";
  } else if (requires_grad()) {
    os << ", requires_grad=True";
  }
  os << ')';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace ember
