// ember-bench-loss: the loss and norm work of a word language model's step on [700 x 5000]
// float32 logits (bench_wordlm.cpp's sizes), against PyTorch (bench_loss_torch.py under
// /usr/bin/python3, or $EMBER_BENCH_PYTHON) in the same run, runs alternating, on 1 and 2
// threads: log_softmax forward; log_softmax + nll_loss forward and backward; cross_entropy
// forward and backward; clip_grad_norm_(max_norm 0.25) over the word LM's parameter shapes
// (4.65M floats, mostly three large tensors) and over many small ones (120 x [256, 256] and
// 120 x [256]: 7.9M floats in 240 tensors, each below the size one tensor alone is split over
// threads). Prints `name value unit` lines: medians over EMBER_BENCH_LOSS_REPS runs
// (default 30) after warm-up, and ember/torch time ratios (below 1: ember is faster).
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "bench/harness.h"
#include "core/ops/factory.h"
#include "core/ops/random.h"
#include "core/thread_pool.h"
#include "nn/functional.h"
#include "nn/utils/clip_grad.h"

#ifndef EMBER_BENCH_LOSS_TORCH_SCRIPT
#define EMBER_BENCH_LOSS_TORCH_SCRIPT "bench/bench_loss_torch.py"
#endif

namespace {

using ember::bench::median;

using namespace ember;
using bench::TorchPeer;
using Clock = std::chrono::steady_clock;

constexpr int64_t kRows = 700, kClasses = 5000;
constexpr int kWarmup = 3;

double time_ms(const std::function<void()>& f) {
  const auto t0 = Clock::now();
  f();
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  ember::bench::start_without_flags("ember-bench-loss",
                                    "log_softmax, log_softmax + nll, cross_entropy and clip_grad_norm_ on a word "
                                    "LM's tensors against PyTorch's. Takes no flags (EMBER_BENCH_LOSS_REPS).",
                                    argc, argv);
  int reps = ember::bench::env_int_at_least("EMBER_BENCH_LOSS_REPS", 30, 5);
  manual_seed(0);
  const Tensor x = randn({kRows, kClasses});
  Tensor xg = clone(x).requires_grad_(true);
  const Tensor target = randint(0, kClasses, {kRows});
  std::vector<Tensor> params;
  const std::vector<IntList> shapes = {{10000, 200}, {800, 200}, {800, 200}, {800},  {800},        {800, 200},
                                       {800, 200},   {800},      {800},      {10000, 200}, {10000}};
  for (const IntList& s : shapes) {
    Tensor p = zeros(s).requires_grad_(true);
    p.set_grad(randn(s));
    params.push_back(p);
  }
  std::vector<Tensor> many_params;
  for (int i = 0; i < 120; ++i) {
    for (const IntList& s : {IntList{256, 256}, IntList{256}}) {
      Tensor p = zeros(s).requires_grad_(true);
      p.set_grad(randn(s));
      many_params.push_back(p);
    }
  }

  struct Case {
    const char* name;   // torch command
    const char* label;  // line name
    std::function<void()> run;
  };
  const std::vector<Case> cases = {
      {"log_softmax", "log_softmax_700x5000", [&] { (void)log_softmax(x, 1); }},
      {"log_softmax_nll", "log_softmax_nll_fwd_bwd_700x5000",
       [&] {
         xg.set_grad(Tensor());
         nn::functional::nll_loss(log_softmax(xg, 1), target).backward();
       }},
      {"cross_entropy", "cross_entropy_fwd_bwd_700x5000",
       [&] {
         xg.set_grad(Tensor());
         nn::functional::cross_entropy(xg, target).backward();
       }},
      {"clip_grad_norm", "clip_grad_norm_wordlm", [&] { nn::utils::clip_grad_norm_(params, 0.25); }},
      {"clip_grad_norm_many", "clip_grad_norm_240_small", [&] { nn::utils::clip_grad_norm_(many_params, 0.25); }},
  };

  const std::string py = bench::peer_python();
  TorchPeer torch(py, EMBER_BENCH_LOSS_TORCH_SCRIPT, {std::to_string(kRows), std::to_string(kClasses)});
  bench::print_peer_version(torch.version(), "torch peer", torch.why());
  if (!torch.ok()) {
    std::printf("# torch unavailable (%s %s did not start: %s); printing ember numbers only\n", py.c_str(),
                EMBER_BENCH_LOSS_TORCH_SCRIPT, torch.why().c_str());
  } else {
    std::printf("# torch %s\n", torch.version().c_str());
  }
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    if (torch.ok()) torch.command("threads " + std::to_string(threads));
    for (const Case& c : cases) {
      for (int i = 0; i < kWarmup; ++i) {
        c.run();
        if (torch.ok()) torch.command(std::string("time ") + c.name);
      }
      std::vector<double> ember_ms, torch_ms;
      for (int i = 0; i < reps; ++i) {
        ember_ms.push_back(time_ms(c.run));
        if (torch.ok()) {
          const std::string r = torch.command(std::string("time ") + c.name);
          if (torch.ok()) torch_ms.push_back(std::atof(r.c_str()));
        }
      }
      const double e = median(ember_ms);
      std::printf("%s_ms_%dt %.3f ms\n", c.label, threads, e);
      if (torch.ok() && !torch_ms.empty()) {
        const double t = median(torch_ms);
        std::printf("torch_%s_ms_%dt %.3f ms\n", c.label, threads, t);
        std::printf("%s_vs_torch_ratio_%dt %.3f ratio\n", c.label, threads, e / t);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
