// ember-bench-autograd: per-op overhead of recording and running the autograd graph.
// A chain of 10,000 element-wise ops on 1-element float32 tensors, forward + backward, one
// thread; prints the median over repetitions divided by the op count. The same chain in LibTorch
// C++ (bench/autograd_libtorch.cpp; Note [LibTorch peer] in bench/harness.h) runs in the same
// run, its repetitions alternating with ember's:
//   autograd_overhead_ns_per_op             ember, forward + backward, per op
//   autograd_graph_free_ns_per_op           ember, freeing the released graph, per op
//   libtorch_autograd_overhead_ns_per_op    LibTorch, forward + backward, per op
//   autograd_overhead_vs_libtorch_ratio     ember / LibTorch (below 1: ember is faster; goal <= 0.5)
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "autograd/ops.h"
#include "bench/harness.h"
#include "core/thread_pool.h"

int main(int argc, char** argv) {
  ember::bench::start_without_flags("ember-bench-autograd",
                                    "Per-op overhead of recording and running the autograd graph, against LibTorch's "
                                    "(Note [LibTorch peer] in bench/harness.h). Takes no flags.",
                                    argc, argv);
  using namespace ember;
  set_num_threads(1);
  constexpr int kOps = 10000, kReps = 25, kWarmup = 5;

  std::string why;
  const std::string peer_binary = bench::libtorch_peer("autograd", why);
  std::unique_ptr<bench::TorchPeer> peer;
  if (!peer_binary.empty()) {
    peer = std::make_unique<bench::TorchPeer>(peer_binary, std::vector<std::string>{"serve"});
    if (!peer->ok()) why = peer_binary + " serve did not start: " + peer->why();
  }
  const bool with_peer = peer && peer->ok();
  bench::print_peer_version(with_peer ? peer->version() : "", "libtorch peer", why);

  Tensor x = tensor({0.5});
  x.requires_grad_(true);
  std::vector<double> per_op, free_per_op, torch_per_op;
  for (int rep = 0; rep < kReps; ++rep) {
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
    x.mutable_grad() = Tensor();
    std::string reply;
    if (peer && peer->ok()) reply = peer->command("rep");
    if (rep >= kWarmup) {
      per_op.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / kOps);
      free_per_op.push_back(std::chrono::duration<double, std::nano>(t2 - t1).count() / kOps);
      if (!reply.empty()) torch_per_op.push_back(std::atof(reply.c_str()));
    }
  }
  const double ember_ns = bench::median(per_op);
  std::printf("autograd_overhead_ns_per_op %.1f ns\n", ember_ns);
  std::printf("autograd_graph_free_ns_per_op %.1f ns\n", bench::median(free_per_op));
  if (torch_per_op.size() == per_op.size()) {
    const double torch_ns = bench::median(torch_per_op);
    std::printf("libtorch_autograd_overhead_ns_per_op %.1f ns\n", torch_ns);
    std::printf("autograd_overhead_vs_libtorch_ratio %.3f ratio\n", ember_ns / torch_ns);
  } else if (with_peer) {
    std::printf("# libtorch peer stopped answering; its lines are left out\n");
  }
  return 0;
}
