// The LibTorch side of ember-bench-wordlm: the same word-LM training step in LibTorch's C++ API,
// driven over stdin/stdout. Built by bench/libtorch_peers against today's LibTorch, or compiled on
// first use against another (Note [LibTorch peer] in bench/harness.h). Started as
// `wordlm_libtorch serve`; prints `ready <version>`, then answers one line per command: `threads N` (torch::set_num_threads, and OpenBLAS's own
// thread count: Debian's LibTorch calls the pthread OpenBLAS, whose threads torch does not
// govern; ember sets both too), `warmup K` (K untimed steps), `step` (one timed step; replies
// with its wall time in ms), `quit`.
#include <dlfcn.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <tuple>

#include "libtorch_peer_loop.h"

namespace {

constexpr int64_t kVocab = 10000, kEmbed = 200, kHidden = 200, kLayers = 2, kBptt = 35, kBatch = 20;
constexpr double kDropout = 0.2, kLr = 20.0, kClip = 0.25;

using State = std::tuple<torch::Tensor, torch::Tensor>;

struct RNNModelImpl : torch::nn::Module {
  RNNModelImpl()
      : encoder(register_module("encoder", torch::nn::Embedding(kVocab, kEmbed))),
        drop(register_module("drop", torch::nn::Dropout(kDropout))),
        rnn(register_module("rnn", torch::nn::LSTM(torch::nn::LSTMOptions(kEmbed, kHidden)
                                                       .num_layers(kLayers)
                                                       .dropout(kDropout)))),
        decoder(register_module("decoder", torch::nn::Linear(kHidden, kVocab))) {}

  std::tuple<torch::Tensor, State> forward(const torch::Tensor& input, const State& hidden) {
    auto [output, state] = rnn->forward(drop->forward(encoder->forward(input)), hidden);
    return {decoder->forward(drop->forward(output)).view({-1, kVocab}), state};
  }

  torch::nn::Embedding encoder;
  torch::nn::Dropout drop;
  torch::nn::LSTM rnn;
  torch::nn::Linear decoder;
};
TORCH_MODULE(RNNModel);

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != "serve") {
    std::fprintf(stderr, "usage: %s serve  (driven by ember-bench-wordlm)\n", argv[0]);
    return 2;
  }
  torch::manual_seed(0);
  RNNModel model;
  model->train();
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(kLr));
  const torch::Tensor source = torch::randint(0, kVocab, {kBptt + 1, kBatch}, torch::kLong);
  const torch::Tensor input = source.narrow(0, 0, kBptt);
  const torch::Tensor targets = source.narrow(0, 1, kBptt).reshape({-1});
  State hidden{torch::zeros({kLayers, kBatch, kHidden}), torch::zeros({kLayers, kBatch, kHidden})};

  auto step = [&] {
    hidden = State{std::get<0>(hidden).detach(), std::get<1>(hidden).detach()};
    optimizer.zero_grad();
    auto [logits, state] = model->forward(input, hidden);
    hidden = state;
    torch::Tensor loss = torch::nn::functional::cross_entropy(logits, targets);
    loss.backward();
    torch::nn::utils::clip_grad_norm_(model->parameters(), kClip);
    optimizer.step();
  };

  return ember::bench::serve_commands([&](const std::string& cmd, std::istringstream& in) {
    if (cmd == "threads") {
      int n = 1;
      in >> n;
      torch::set_num_threads(n);
      // Looked up rather than linked: the BLAS behind libtorch is whatever the system chose.
      using SetThreads = void (*)(int);
      const auto openblas_threads = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
      if (openblas_threads != nullptr) openblas_threads(n);
      std::printf("ok %d%s\n", torch::get_num_threads(), openblas_threads != nullptr ? " openblas" : "");
    } else if (cmd == "warmup") {
      int k = 0;
      in >> k;
      for (int i = 0; i < k; ++i) step();
      std::printf("ok\n");
    } else if (cmd == "step") {
      const auto t0 = std::chrono::steady_clock::now();
      step();
      std::printf("%.6f\n", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    } else {
      return false;
    }
    return true;
  });
}
