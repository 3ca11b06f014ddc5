// The README's "API at a glance", built against an installed ember with find_package(ember)
// and run by install_consumer_test: every line of the README's block is here (the test checks
// that), so if this stops compiling, linking or running, the README is wrong. The process
// group is one rank: run_install_test.cmake gives it the environment, or ember-run does.
#include <cmath>
#include <cstdio>
#include <iostream>

#include <ember/ember.h>
#include <ember/nn/rnn.h>  // one header on its own, as a project may include it

#include "core/tensor.h"  // this project's own core/ and nn/, not ember's (consumer/CMakeLists.txt)
#include "nn/rnn.h"

using namespace ember;
namespace F = ember::nn::functional;
namespace rnn = ember::nn::utils::rnn;

// The PyTorch FAQ's module: pack -> LSTM -> unpack with total_length, under DataParallel.
struct MyModuleImpl : nn::Cloneable<MyModuleImpl> {
  nn::Embedding emb{nullptr}; nn::LSTM lstm{nullptr}; nn::Linear fc{nullptr};
  MyModuleImpl() { reset(); }
  void reset() override {
    emb  = register_module("emb", nn::Embedding(257, 32, /*padding_idx=*/0));
    lstm = register_module("lstm", nn::LSTM(nn::LSTMOptions(32, 128)));
    fc   = register_module("fc", nn::Linear(128, 6));
  }
  // padded: [T, B] int64 tokens; lengths: [B] int64. Returns [T, B, 6].
  Tensor forward(const Tensor& padded, const Tensor& lengths) {
    auto packed = rnn::pack_padded_sequence(emb(padded), lengths, false, /*enforce_sorted=*/false);
    auto [out, state] = lstm->forward(packed);
    auto [unpacked, lens] = rnn::pad_packed_sequence(out, false, 0.0, /*total_length=*/padded.size(0));
    return fc(unpacked);
  }
};
EMBER_MODULE(MyModule);

#define EXPECT(cond)                                              \
  do {                                                            \
    if (!(cond)) {                                                \
      std::fprintf(stderr, "consumer: check failed: %s\n", #cond); \
      return 2;                                                   \
    }                                                             \
  } while (0)

int main() {
  // Tensors and autograd
  Tensor x = randn({64, 32});
  Tensor w = zeros({32, 8}).requires_grad_();
  Tensor loss = mean(pow(matmul(x, w) - 1.0, 2.0));
  loss.backward();
  double v = loss.item();
  { NoGradGuard g; native::add_(w, w.grad(), -0.1); }
  Tensor y = to(x, Device("cpu:1"));
  EXPECT(v == 1.0 && y.device().str() == "cpu:1");

  // DataParallel: [T x B] input scattered on dim 1, its [B] lengths on dim 0, in one call
  Tensor padded = randint(1, 257, {7, 4});
  Tensor lengths = from_vector<int64_t>({7, 3, 5, 2});
  Tensor labels = randint(0, 6, {28});
  MyModule model;
  parallel::DataParallel<MyModuleImpl> dp(model, {Device("cpu:0"), Device("cpu:1")}, std::nullopt, /*dim=*/1);
  dp.scatter_dims({1, 0});
  Tensor out = dp(padded, lengths);
  EXPECT(out.sizes() == (IntList{7, 4, 6}));

  // Losses, optimizers, LibTorch's spellings
  Tensor logp = F::log_softmax(out, 2).reshape({-1, 6});
  Tensor nll = nll_loss(logp, labels);
  Tensor ce = F::cross_entropy(out.reshape({-1, 6}), labels, F::CrossEntropyFuncOptions().ignore_index(0));
  optim::Adam adam(model->parameters(), optim::AdamOptions(1e-3));
  for (auto& group : adam.param_groups()) static_cast<optim::AdamOptions&>(group.options()).lr(5e-4);
  for (const auto& p : model->named_parameters()) std::cout << p.key() << " " << p.value().numel() << "\n";
  std::cout << *model;
  std::cout << "\n";
  EXPECT(std::abs(nll.item() - cross_entropy(out.reshape({-1, 6}), labels).item()) < 1e-5);
  EXPECT(adam.param_groups()[0].options().get_lr() == 5e-4);
  adam.zero_grad();
  ce.backward();
  adam.step();
  EXPECT(model->fc->weight.grad().defined());

  // Data
  data::TensorDataset dataset({randn({100, 3}), randint(0, 2, {100})});
  data::DataLoader loader(dataset, data::DataLoaderOptions{.batch_size = 64, .shuffle = true,
                          .num_workers = 2, .worker_init_fn = [](int id) { /* seed your own RNG */ },
                          .pin_memory = true});
  for (auto& batch : loader) { /* batch's tensors .to(Device("cuda:0"), true): asynchronous uploads */ }
  int batches = 0;
  for (auto& batch : loader) batches += batch.size() == 2 ? 1 : 0;
  EXPECT(batches == 2);

  // Checkpoints are safetensors files
  save(model, "model.safetensors");
  save_safetensors("weights.safetensors", model->state_dict());
  save(adam, "adam.safetensors");
  MyModule restored;
  load(restored, "model.safetensors");
  load(adam, "adam.safetensors");
  auto loaded = load_safetensors("weights.safetensors");
  EXPECT(loaded.size() == model->state_dict().size());
  EXPECT(restored->fc->weight.to_vector<float>() == model->fc->weight.to_vector<float>());

  // DistributedDataParallel on the launcher's group (one rank here)
  auto pg = parallel::init_process_group("tcp");       // or "mpi", "nccl"
  parallel::DistributedDataParallel<MyModuleImpl> ddp(model, pg);
  model->zero_grad();
  sum(ddp(padded, lengths)).backward();                // gradients averaged over the ranks
  EXPECT(pg->size() == 1 && model->fc->weight.grad().defined());

  // Tensor methods and indexing as in LibTorch
  {
    using namespace ember::indexing;
    Tensor h = x.view({8, 8, 32}).narrow(0, 0, 4).detach();
    Tensor s = x.index({Slice(0, 5), 1});
    x.index_put_({x.lt(0.0)}, 0.0);
    Tensor ids = tensor(std::vector<int64_t>{3, 1, 4});
    { InferenceMode guard; Tensor p = model(padded, lengths).argmax(2); }
    InferenceMode guard;
    Tensor p = model(padded, lengths).argmax(2);
    EXPECT(p.is_inference() && h.size(0) == 4 && s.sizes() == IntList{5} && ids.dtype() == kInt64 &&
           x.min().item() >= 0.0 && p.sizes() == (IntList{7, 4}));
  }

  Tensor g = tensor({1, 2, 3});
  g.requires_grad_(true);
  sum(mul(mul(g, g), 3.0)).backward();
  std::printf("own headers: %s %s\n", my_app::own_core_header(), my_app::own_nn_header());
  std::printf("loss=%.4f y_device=%s out=%s batches=%d tensors=%zu world_size=%d grad=%g\n", v,
              y.device().str().c_str(), out.device().str().c_str(), batches, loaded.size(), pg->size(),
              g.grad().to_vector<float>()[0]);
  return 0;
}
