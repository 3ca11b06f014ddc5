// save_checkpoint / load_checkpoint: one safetensors file with "model.*" and "optim.*" tensors
// and JSON hyper-parameters in the metadata; training interrupted by save + load into fresh
// objects continues bit-exactly; extra metadata and RNG state; errors for a wrong optimizer type,
// a mismatched module and a non-checkpoint file.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "autograd/ops.h"
#include "core/serialization.h"
#include "nn/activation.h"
#include "nn/checkpoint.h"
#include "nn/container.h"
#include "nn/detail/json.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"
#include "tests/nn/nn_test_util.h"

namespace ember::nn {
namespace {

using testing::bit_equal;
using testing::error_of;

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ember_ckpt_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

std::shared_ptr<Sequential> model() {
  return std::make_shared<Sequential>(std::make_shared<Embedding>(10, 6, 0), std::make_shared<LayerNorm>(IntList{6}),
                                      Dropout(0.2), std::make_shared<Linear>(6, 4));
}

Tensor batch_tokens(int k) {
  Generator g(1000 + static_cast<uint64_t>(k));
  return randint(0, 10, {8}, TensorOptions(kInt64), &g);
}
Tensor batch_targets(int k) {
  Generator g(2000 + static_cast<uint64_t>(k));
  return randint(0, 4, {8}, TensorOptions(kInt64), &g);
}

void train(Sequential& net, optim::Optimizer& opt, int from, int to) {
  for (int k = from; k < to; ++k) {
    opt.zero_grad();
    Tensor loss = F::cross_entropy(net.forward(batch_tokens(k)), batch_targets(k), {.label_smoothing = 0.1});
    loss.backward();
    opt.step();
  }
}

TEST_F(Checkpoint, ResumedTrainingIsBitExact) {
  manual_seed(7);
  auto net = model();
  optim::Adam opt(net->parameters(), optim::AdamOptions(0.01).amsgrad(true));
  train(*net, opt, 0, 3);
  save_checkpoint(path("ckpt.safetensors"), *net, &opt, {{"epoch", "3"}});
  // The uninterrupted run continues here...
  train(*net, opt, 3, 6);

  // ... and the resumed one starts from fresh objects with other weights and hyper-parameters.
  manual_seed(99);
  auto fresh = model();
  optim::Adam fresh_opt(fresh->parameters(), optim::AdamOptions(0.5));
  std::map<std::string, std::string> extra;
  load_checkpoint(path("ckpt.safetensors"), *fresh, &fresh_opt, &extra, {.restore_rng_state = true});
  EXPECT_EQ(extra.at("epoch"), "3");
  EXPECT_EQ(fresh_opt.param_groups()[0].options().get_lr(), 0.01);
  train(*fresh, fresh_opt, 3, 6);

  auto a = net->state_dict(), b = fresh->state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bit_equal(a[i].second, b[i].second)) << a[i].first;
  auto sa = opt.state_dict(), sb = fresh_opt.state_dict();
  for (auto& [idx, st] : sa.state) {
    for (auto& [key, t] : st) EXPECT_TRUE(bit_equal(t, sb.state.at(idx).at(key))) << idx << "." << key;
  }
}

TEST_F(Checkpoint, FileLayoutIsNamedTensorsPlusJsonMetadata) {
  auto net = model();
  optim::SGD opt({optim::ParamGroup({net->parameters()[0]}),
                  optim::ParamGroup({net->parameters()[1], net->parameters()[2]},
                                    std::make_unique<optim::SGDOptions>(optim::SGDOptions(0.3).momentum(0.9)))},
                 optim::SGDOptions(0.1).momentum(0.5));
  train(*net, opt, 0, 1);
  save_checkpoint(path("c.safetensors"), *net, &opt, {{"note", "hello"}});
  std::map<std::string, std::string> meta;
  auto tensors = load_safetensors_map(path("c.safetensors"), &meta);
  EXPECT_TRUE(tensors.count("model.0.weight"));
  EXPECT_TRUE(tensors.count("model.3.bias"));
  EXPECT_TRUE(tensors.count("optim.0.0.momentum_buffer"));
  EXPECT_TRUE(tensors.count("optim.1.2.momentum_buffer"));
  EXPECT_EQ(meta.at("format"), "ember.checkpoint.v1");
  EXPECT_EQ(meta.at("optim.type"), "SGD");
  EXPECT_EQ(meta.at("optim.1.params"), "[1,2]");
  auto opts = detail::parse_json(meta.at("optim.1.options"), "test");
  EXPECT_EQ(opts.find("lr")->as_number("lr"), 0.3);
  EXPECT_EQ(opts.find("momentum")->as_number("momentum"), 0.9);
  EXPECT_EQ(meta.at("extra.note"), "hello");
  EXPECT_TRUE(meta.count("rng.cpu"));
}

TEST_F(Checkpoint, ModuleOnlyRoundTrip) {
  auto net = model();
  save_checkpoint(path("m.safetensors"), *net);
  auto other = model();
  load_checkpoint(path("m.safetensors"), *other);
  auto a = net->state_dict(), b = other->state_dict();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bit_equal(a[i].second, b[i].second));
  optim::SGD opt(other->parameters(), optim::SGDOptions(0.1));
  EXPECT_NE(error_of([&] { load_checkpoint(path("m.safetensors"), *other, &opt); }).find("holds no optimizer state"),
            std::string::npos);
}

TEST_F(Checkpoint, MismatchesAreErrorsThatChangeNothing) {
  auto net = model();
  optim::Adam opt(net->parameters());
  train(*net, opt, 0, 1);
  save_checkpoint(path("x.safetensors"), *net, &opt);
  auto other = model();
  Tensor before = native::clone(other->parameters()[0]);
  optim::SGD sgd(other->parameters(), optim::SGDOptions(0.1));
  EXPECT_NE(error_of([&] { load_checkpoint(path("x.safetensors"), *other, &sgd); })
                .find("holds Adam state, the optimizer is SGD"),
            std::string::npos);
  optim::Adam partial({other->parameters()[0]});
  EXPECT_NE(error_of([&] { load_checkpoint(path("x.safetensors"), *other, &partial); }).find("optimizer group 0"),
            std::string::npos);
  EXPECT_TRUE(bit_equal(other->parameters()[0], before));
  Sequential wrong(std::make_shared<Linear>(6, 4));
  EXPECT_NE(error_of([&] { load_checkpoint(path("x.safetensors"), wrong); }).find("Unexpected key(s) in state_dict"),
            std::string::npos);
  save_safetensors(path("plain.safetensors"), {{"w", zeros({1})}});
  EXPECT_NE(error_of([&] { load_checkpoint(path("plain.safetensors"), *other); }).find("is not an ember checkpoint"),
            std::string::npos);
}

}  // namespace
}  // namespace ember::nn
