// ember-bench-wordlm: one training step of the word language model of examples/word_lm of this
// size: vocabulary 10,000, Embedding 200 -> Dropout 0.2 -> LSTM(200, 200,
// num_layers=2, dropout=0.2) -> Dropout -> Linear(200, 10,000), a chunk of bptt 35 x batch 20,
// the state detached from the previous step, cross_entropy, clip_grad_norm_(0.25), SGD(lr 20),
// on 1 and 2 threads. The same program in LibTorch C++ (bench/wordlm_libtorch.cpp against
// today's LibTorch or another: Note [LibTorch peer] in bench/harness.h) runs in the same run, its
// steps alternating with ember's so both see the same machine load. Prints `name value unit`
// lines: medians over EMBER_BENCH_WORDLM_STEPS timed steps (default 20, at least 5) after 5
// warm-up steps, and the ember / LibTorch time ratio (below 1: ember is faster). Without a
// LibTorch peer only the ember lines are printed, with a `#` line saying why.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "autograd/ops.h"
#include "bench/harness.h"
#include "core/ops/factory.h"
#include "core/ops/random.h"
#include "core/thread_pool.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/optim/sgd.h"
#include "nn/rnn.h"
#include "nn/utils/clip_grad.h"

namespace {

using namespace ember;
using namespace ember::bench;  // the harness: Clock, median, TorchPeer, ...

constexpr int64_t kVocab = 10000, kEmbed = 200, kHidden = 200, kLayers = 2, kBptt = 35, kBatch = 20;
constexpr double kDropout = 0.2, kLr = 20.0, kClip = 0.25;
constexpr int kWarmup = 5;

struct Step {
  std::shared_ptr<nn::EmbeddingImpl> encoder = std::make_shared<nn::EmbeddingImpl>(kVocab, kEmbed);
  std::shared_ptr<nn::DropoutImpl> drop = std::make_shared<nn::DropoutImpl>(kDropout);
  std::shared_ptr<nn::LSTMImpl> rnn =
      std::make_shared<nn::LSTMImpl>(nn::LSTMOptions(kEmbed, kHidden).num_layers(kLayers).dropout(kDropout));
  std::shared_ptr<nn::LinearImpl> decoder = std::make_shared<nn::LinearImpl>(kHidden, kVocab);
  std::vector<Tensor> params;
  std::unique_ptr<optim::SGD> sgd;
  Tensor input, targets;
  nn::LSTMImpl::State hidden;

  Step() {
    for (nn::Module* m : std::initializer_list<nn::Module*>{encoder.get(), rnn.get(), decoder.get()}) {
      for (const Tensor& p : m->parameters()) params.push_back(p);
    }
    sgd = std::make_unique<optim::SGD>(params, optim::SGDOptions(kLr));
    const Tensor source = randint(0, kVocab, {kBptt + 1, kBatch});
    input = narrow(source, 0, 0, kBptt);
    targets = reshape(narrow(source, 0, 1, kBptt), {-1});
    hidden = {zeros({kLayers, kBatch, kHidden}), zeros({kLayers, kBatch, kHidden})};
  }

  void run() {
    hidden = {detach(std::get<0>(hidden)), detach(std::get<1>(hidden))};
    sgd->zero_grad();
    auto [output, state] = rnn->forward(drop->forward(encoder->forward(input)), hidden);
    hidden = state;
    const Tensor logits = reshape(decoder->forward(drop->forward(output)), {-1, kVocab});
    const Tensor loss = nn::functional::cross_entropy(logits, targets);
    loss.backward();
    nn::utils::clip_grad_norm_(params, kClip);
    sgd->step();
  }
};

}  // namespace

int main(int argc, char** argv) {
  ember::bench::start_without_flags("ember-bench-wordlm",
                                    "One training step of examples/word_lm's model against LibTorch C++'s. Takes no "
                                    "flags (EMBER_BENCH_WORDLM_STEPS).",
                                    argc, argv);
  int steps = ember::bench::env_int_at_least("EMBER_BENCH_WORDLM_STEPS", 20, 5);

  std::string why;
  const std::string peer_binary = bench::libtorch_peer("wordlm", why);
  std::unique_ptr<TorchPeer> peer;
  if (!peer_binary.empty()) {
    peer = std::make_unique<TorchPeer>(peer_binary, std::vector<std::string>{"serve"});
    if (!peer->ok()) why = peer_binary + " serve did not start: " + peer->why();
  }
  const bool with_peer = peer && peer->ok();
  bench::print_peer_version(with_peer ? peer->version() : "", "libtorch peer", why);
  if (with_peer) {
    std::printf("# libtorch %s (%s)\n", peer->version().c_str(), peer_binary.c_str());
  } else {
    std::printf("# libtorch peer skipped: %s; printing ember numbers only\n", why.c_str());
  }

  manual_seed(0);
  Step step;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    if (with_peer) {
      const std::string reply = peer->command("threads " + std::to_string(threads));
      std::printf("# libtorch threads %d: %s\n", threads, reply.c_str());
      peer->command("warmup " + std::to_string(kWarmup));
    }
    for (int i = 0; i < kWarmup; ++i) step.run();
    std::vector<double> ember_ms, torch_ms;
    for (int i = 0; i < steps; ++i) {
      const auto t0 = Clock::now();
      step.run();
      ember_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      if (with_peer) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the other side's threads settle
        const std::string r = peer->command("step");
        if (peer->ok()) torch_ms.push_back(std::atof(r.c_str()));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    const double e = median(ember_ms);
    std::printf("wordlm_step_ms_%dt %.3f ms\n", threads, e);
    if (!torch_ms.empty()) {
      const double t = median(torch_ms);
      std::printf("libtorch_wordlm_step_ms_%dt %.3f ms\n", threads, t);
      std::printf("wordlm_vs_libtorch_ratio_%dt %.3f ratio\n", threads, e / t);
    }
    std::fflush(stdout);
  }
  return 0;
}
