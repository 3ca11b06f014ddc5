// ember-bench-wordlm: one training step of the word language model of examples/word_lm at the
// size issue 20 names: vocabulary 10,000, Embedding 200 -> Dropout 0.2 -> LSTM(200, 200,
// num_layers=2, dropout=0.2) -> Dropout -> Linear(200, 10,000), a chunk of bptt 35 x batch 20,
// the state detached from the previous step, cross_entropy, clip_grad_norm_(0.25), SGD(lr 20),
// on 1 and 2 threads. The same program in LibTorch C++ (bench/wordlm_libtorch.cpp against
// Debian's libtorch-dev, built on first use: Note [LibTorch peer]) runs in the same run, its
// steps alternating with ember's so both see the same machine load. Prints `name value unit`
// lines: medians over EMBER_BENCH_WORDLM_STEPS timed steps (default 20, at least 5) after 5
// warm-up steps, and the ember / LibTorch time ratio (below 1: ember is faster). Without
// libtorch-dev (or when its compile fails) only the ember lines are printed, with a `#` line
// saying why.
#include <signal.h>
#include <sys/stat.h>

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
#include "bench/torch_peer.h"
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

#ifndef EMBER_BENCH_WORDLM_PEER_SOURCE
#define EMBER_BENCH_WORDLM_PEER_SOURCE "bench/wordlm_libtorch.cpp"
#endif
#ifndef EMBER_BENCH_WORDLM_PEER_BINARY
#define EMBER_BENCH_WORDLM_PEER_BINARY "wordlm_libtorch"
#endif
#ifndef EMBER_BENCH_CXX
#define EMBER_BENCH_CXX "g++"
#endif

// Note [LibTorch peer]
// Compiling against torch's headers takes about 20 s of CPU (2 minutes of wall time on a loaded
// 2-core machine), so the LibTorch side is not a CMake target: a normal build and CI never pay
// for it. The first run of ember-bench-wordlm compiles bench/wordlm_libtorch.cpp with the C++
// compiler of the build into <build>/bench/wordlm_libtorch (again whenever the source is newer
// than the binary), against Debian's libtorch-dev: headers under /usr/include/torch (its CMake
// package, /usr/lib/x86_64-linux-gnu/cmake/Torch, adds only -D_GLIBCXX_USE_CXX11_ABI=1), and
// -ltorch -ltorch_cpu -lc10. EMBER_BENCH_LIBTORCH_PREFIX=P (default /usr) takes the headers from
// P/include and the libraries from P/lib instead (e.g. an unpacked LibTorch archive; remove the
// compiled peer after changing it). scripts/setup.sh installs libtorch-dev with
// EMBER_SETUP_TORCH=1 (as scripts/test.sh does); without it the peer lines are skipped with a
// reason.

namespace {

using namespace ember;
using Clock = std::chrono::steady_clock;
using bench::TorchPeer;

constexpr int64_t kVocab = 10000, kEmbed = 200, kHidden = 200, kLayers = 2, kBptt = 35, kBatch = 20;
constexpr double kDropout = 0.2, kLr = 20.0, kClip = 0.25;
constexpr int kWarmup = 5;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

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

int64_t mtime_ns(const char* path) {
  struct stat st{};
  if (::stat(path, &st) != 0) return -1;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// The peer binary, compiled if missing or older than its source; empty with `why` set when it
// cannot be had.
std::string build_peer(std::string& why) {
  const std::string binary = EMBER_BENCH_WORDLM_PEER_BINARY, source = EMBER_BENCH_WORDLM_PEER_SOURCE;
  const char* prefix_env = std::getenv("EMBER_BENCH_LIBTORCH_PREFIX");
  const std::string prefix = prefix_env != nullptr && *prefix_env != '\0' ? prefix_env : "/usr";
  const std::string api_include = prefix + "/include/torch/csrc/api/include";
  if (mtime_ns((api_include + "/torch/torch.h").c_str()) < 0) {
    why = "LibTorch's headers are not installed (no " + api_include +
          "/torch/torch.h; EMBER_SETUP_TORCH=1 scripts/setup.sh installs Debian's libtorch-dev)";
    return "";
  }
  const int64_t built = mtime_ns(binary.c_str());
  if (built >= 0 && built >= mtime_ns(source.c_str())) return binary;
  const std::string log = binary + ".log", tmp = binary + ".tmp";
  const std::string libs = prefix == "/usr" ? "" : " -L'" + prefix + "/lib' -Wl,-rpath,'" + prefix + "/lib'";
  const std::string includes = prefix == "/usr" ? "" : " -I'" + prefix + "/include'";
  const std::string cmd = std::string(EMBER_BENCH_CXX) + " -O2 -std=c++17 -D_GLIBCXX_USE_CXX11_ABI=1" + includes +
                          " -I'" + api_include + "' '" + source + "' -o '" + tmp + "'" + libs +
                          " -ltorch -ltorch_cpu -lc10 >'" + log + "' 2>&1 && mv '" + tmp + "' '" + binary + "'";
  std::printf("# compiling the LibTorch peer (once; see Note [LibTorch peer]): %s\n", cmd.c_str());
  std::fflush(stdout);
  const auto t0 = Clock::now();
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    why = "compiling " + source + " against libtorch-dev failed (status " + std::to_string(rc) + "; see " + log + ")";
    return "";
  }
  std::printf("# LibTorch peer compiled in %.0f s\n", std::chrono::duration<double>(Clock::now() - t0).count());
  return binary;
}

}  // namespace

int main() {
  signal(SIGPIPE, SIG_IGN);
  int steps = 20;
  if (const char* s = std::getenv("EMBER_BENCH_WORDLM_STEPS")) steps = std::max(5, std::atoi(s));

  std::string why;
  const std::string peer_binary = build_peer(why);
  std::unique_ptr<TorchPeer> peer;
  if (!peer_binary.empty()) {
    peer = std::make_unique<TorchPeer>(peer_binary, "serve", std::vector<std::string>{});
    if (!peer->ok()) why = peer_binary + " serve did not start";
  }
  const bool with_peer = peer && peer->ok();
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
