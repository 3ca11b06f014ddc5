// The README's "API at a glance", built against an installed ember with find_package(ember)
// and run by install_consumer_test: every line of the README's block is here (the test checks
// that), so if this stops compiling, linking or running, the README is wrong. The process
// group is one rank: run_install_test.cmake gives it the environment, or ember-run does.
#include <cstdio>
#include <iostream>

#include <ember/ember.h>
#include <ember/nn/rnn.h>  // one header on its own, as a project may include it

#include "core/tensor.h"  // this project's own core/ and nn/, not ember's (consumer/CMakeLists.txt)
#include "nn/rnn.h"

using namespace ember;
namespace rnn = ember::nn::utils::rnn;

// The PyTorch FAQ's module: pack -> LSTM -> unpack with total_length, under DataParallel.
struct MyModule : nn::Cloneable<MyModule> {
  std::shared_ptr<nn::Embedding> emb; std::shared_ptr<nn::LSTM> lstm; std::shared_ptr<nn::Linear> fc;
  MyModule() : Cloneable("MyModule") { reset(); }
  void reset() override {
    emb  = register_module("emb", std::make_shared<nn::Embedding>(257, 32, /*padding_idx=*/0));
    lstm = register_module("lstm", std::make_shared<nn::LSTM>(nn::LSTMOptions(32, 128)));
    fc   = register_module("fc", std::make_shared<nn::Linear>(128, 6));
  }
  // padded: [T, B] int64 tokens; lengths: [B] int64. Returns [T, B, 6].
  Tensor forward(const Tensor& padded, const Tensor& lengths) {
    auto packed = rnn::pack_padded_sequence(emb->forward(padded), lengths, false, /*enforce_sorted=*/false);
    auto [out, state] = lstm->forward(packed);
    auto [unpacked, lens] = rnn::pad_packed_sequence(out, false, 0.0, /*total_length=*/padded.size(0));
    return fc->forward(unpacked);
  }
};

// LibTorch's spelling (EMBER_MODULE holder).
struct NetImpl : nn::Cloneable<NetImpl> {
  std::shared_ptr<nn::Linear> fc;
  NetImpl() { reset(); }
  void reset() override { fc = register_module("fc", std::make_shared<nn::Linear>(32, 2)); }
  Tensor forward(const Tensor& in) { return fc->forward(in).log_softmax(1); }
};
EMBER_MODULE(Net);

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
  auto model = std::make_shared<MyModule>();
  parallel::DataParallel<MyModule> dp(model, {Device("cpu:0"), Device("cpu:1")}, std::nullopt, /*dim=*/1);
  dp.scatter_dims({1, 0});
  Tensor out = dp(padded, lengths);
  sum(out).backward();
  EXPECT(out.sizes() == (IntList{7, 4, 6}) && model->fc->weight.grad().defined());

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
  save_safetensors("model.safetensors", model->state_dict());
  auto loaded = load_safetensors("model.safetensors");
  EXPECT(loaded.size() == model->state_dict().size());

  // DistributedDataParallel on the launcher's group (one rank here)
  auto pg = parallel::init_process_group("tcp");       // or "mpi", "nccl"
  parallel::DistributedDataParallel<MyModule> ddp(model, pg);
  model->zero_grad();
  sum(ddp(padded, lengths)).backward();                // gradients averaged over the ranks
  EXPECT(pg->size() == 1 && model->fc->weight.grad().defined());

  // LibTorch's spelling
  {
    using namespace ember::indexing;
    Tensor h = x.view({8, 8, 32}).narrow(0, 0, 4).detach();
    Tensor s = x.index({Slice(0, 5), 1});
    x.index_put_({x.lt(0.0)}, 0.0);
    Tensor ids = tensor(std::vector<int64_t>{3, 1, 4});
    Net net;
    Tensor logp = net(x);
    std::cout << *net;
    std::cout << "\n";
    optim::SGD sgd(net->parameters(), 0.1);
    optim::ReduceLROnPlateau plateau(sgd);
    { InferenceMode guard; Tensor p = net(x).argmax(1); }
    InferenceMode guard;
    Tensor p = net(x).argmax(1);
    EXPECT(p.is_inference() && h.size(0) == 4 && s.sizes() == IntList{5} && ids.dtype() == kInt64 &&
           x.min().item() >= 0.0 && logp.sizes() == (IntList{64, 2}));
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
