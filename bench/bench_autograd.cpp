// ember-bench-autograd: per-op overhead of recording and running the autograd graph.
// A chain of 10,000 element-wise ops on 1-element tensors, forward + backward, one thread;
// prints the median over repetitions divided by the op count.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "autograd/ops.h"
#include "core/thread_pool.h"

int main() {
  using namespace ember;
  set_num_threads(1);
  constexpr int kOps = 10000;
  Tensor x = tensor({0.5});
  x.requires_grad_(true);
  std::vector<double> per_op, free_per_op;
  for (int rep = 0; rep < 25; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    Tensor y = x;
    for (int i = 0; i < kOps / 2; ++i) {
      y = mul(y, 1.0001);
      y = add(y, 0.0001);
    }
    y.backward();
    auto t1 = std::chrono::steady_clock::now();
    y = Tensor();  // frees the (already released) graph
    auto t2 = std::chrono::steady_clock::now();
    if (rep >= 5) {
      per_op.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / kOps);
      free_per_op.push_back(std::chrono::duration<double, std::nano>(t2 - t1).count() / kOps);
    }
    x.mutable_grad() = Tensor();
  }
  std::sort(per_op.begin(), per_op.end());
  std::sort(free_per_op.begin(), free_per_op.end());
  std::printf("autograd_overhead_ns_per_op %.1f ns\n", per_op[per_op.size() / 2]);
  std::printf("autograd_graph_free_ns_per_op %.1f ns\n", free_per_op[free_per_op.size() / 2]);
  return 0;
}
