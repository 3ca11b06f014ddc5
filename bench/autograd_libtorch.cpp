// The LibTorch side of ember-bench-autograd: the same chain of 10,000 element-wise ops on a
// 1-element tensor that requires grad (mul by 1.0001, add 0.0001, alternating), forward and
// backward, one thread, in LibTorch's C++ API, driven over stdin/stdout as TorchPeer expects
// (bench/harness.h). Started as `autograd_libtorch serve`; prints `ready <version>`, then answers
// one line per command: `rep` (one timed chain; replies with the nanoseconds per op), `quit`.
// Built by bench/libtorch_peers (today's LibTorch from the peer environment) or compiled on first
// use against another LibTorch (Note [LibTorch peer] in bench/harness.h).
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "libtorch_peer_loop.h"

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != "serve") {
    std::fprintf(stderr, "usage: %s serve\n", argv[0]);
    return 2;
  }
  constexpr int kOps = 10000;
  torch::set_num_threads(1);
  torch::Tensor x = torch::tensor({0.5f}, torch::kFloat32).requires_grad_(true);
  const auto rep = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    torch::Tensor y = x;
    for (int i = 0; i < kOps / 2; ++i) {
      y = torch::mul(y, 1.0001);
      y = torch::add(y, 0.0001);
    }
    y.backward();
    const auto t1 = std::chrono::steady_clock::now();
    x.mutable_grad() = torch::Tensor();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / kOps;
  };
  return ember::bench::serve_commands([&](const std::string& cmd, std::istringstream&) {
    if (cmd != "rep") return false;
    std::printf("%.3f\n", rep());
    return true;
  });
}
