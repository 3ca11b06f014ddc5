// LibTorch habits a training program meets, compiled against ember with LibTorch's meaning:
// built-in layers as module holders (nn::Linear fc{nullptr}; fc = register_module("fc",
// nn::Linear(4, 2)); fc(x); fc->forward(x)), the loss and softmax spellings (top-level
// nll_loss / cross_entropy, F::log_softmax, F::CrossEntropyFuncOptions().ignore_index(0)),
// save / load of a model and an optimizer, named_parameters() items with key() / value(), and
// a param group's lr through its options. One test per habit; each checks the value, not only
// that it compiles.
#include <gtest/gtest.h>

#include <sstream>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "ember/ember.h"

namespace {
using namespace ember;
namespace F = ember::nn::functional;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ember_habits_" + std::to_string(getpid()) + "_" + name)).string();
}

bool same_values(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.to_vector<float>() == b.to_vector<float>();
}

// PyTorch's word language model as a LibTorch user writes it: layers are holders held by value.
struct WordModelImpl : nn::Module {
  WordModelImpl(int64_t ntoken, int64_t nhid) {
    encoder = register_module("encoder", nn::Embedding(ntoken, nhid));
    rnn = register_module("rnn", nn::LSTM(nn::LSTMOptions(nhid, nhid).num_layers(2)));
    drop = register_module("drop", nn::Dropout(0.2));
    decoder = register_module("decoder", nn::Linear(nhid, ntoken));
  }
  Tensor forward(const Tensor& tokens) {
    auto [out, state] = rnn->forward(drop(encoder(tokens)));
    return F::log_softmax(decoder(out), 2);
  }
  nn::Embedding encoder{nullptr};
  nn::LSTM rnn{nullptr};
  nn::Dropout drop{nullptr};
  nn::Linear decoder{nullptr};
};
EMBER_MODULE(WordModel);

TEST(LibTorchHabits, BuiltInLayersAreModuleHolders) {
  struct Net : nn::Module {
    Net() { fc = register_module("fc", nn::Linear(4, 2)); }
    nn::Linear fc{nullptr};
  };
  Net net;
  Tensor x = randn({3, 4});
  Tensor y = net.fc(x);
  EXPECT_EQ(y.sizes(), (IntList{3, 2}));
  EXPECT_TRUE(same_values(y, net.fc->forward(x)));
  EXPECT_TRUE(same_values(y, F::linear(x, net.fc->weight, net.fc->bias)));
  // The registered module is the holder's: one parameter set, reached both ways.
  ASSERT_EQ(net.parameters().size(), 2u);
  EXPECT_EQ(net.parameters()[0].impl(), net.fc->weight.impl());
  EXPECT_EQ(net.named_children()[0].second.get(), net.fc.get());
  // A copy shares the module; printing names the layer.
  nn::Linear alias = net.fc;
  EXPECT_EQ(alias.get(), net.fc.get());
  std::ostringstream os;
  os << net.fc;
  EXPECT_EQ(os.str(), "Linear(in_features=4, out_features=2, bias=True)");
  // An empty holder says so instead of crashing.
  nn::Linear empty{nullptr};
  EXPECT_TRUE(empty.is_empty());
  EXPECT_THROW(empty(x), Error);
}

TEST(LibTorchHabits, SequentialOfHolders) {
  nn::Linear first(3, 4);
  nn::Sequential seq(first, nn::ReLU(), nn::Linear(4, 2));
  Tensor x = randn({5, 3});
  EXPECT_EQ(seq(x).sizes(), (IntList{5, 2}));
  EXPECT_EQ(seq->parameters().size(), 4u);
  // The holder passed in is the module inside: one set of parameters.
  EXPECT_EQ(seq->parameters()[0].impl(), first->weight.impl());
  nn::ModuleList list(nn::Linear(2, 2), nn::Tanh());
  list->push_back(nn::Linear(2, 1));
  EXPECT_EQ(list->size(), 3u);
  EXPECT_EQ(list->parameters().size(), 4u);
}

TEST(LibTorchHabits, ModelOfHoldersTrainsWithoutSharedPtrs) {
  manual_seed(0);
  WordModel model(20, 8);
  Tensor tokens = randint(0, 20, {5, 3});
  Tensor target = randint(0, 20, {5, 3});
  optim::Adam adam(model->parameters(), optim::AdamOptions(0.03));
  auto step = [&] {
    adam.zero_grad();
    Tensor loss = nll_loss(model(tokens).view({15, 20}), target.view({15}));
    loss.backward();
    adam.step();
    return loss.item();
  };
  model->eval();  // no dropout: one batch, memorized
  const double first = step();
  double last = first;
  for (int i = 0; i < 60; ++i) last = step();
  EXPECT_LT(last, first * 0.6);
  EXPECT_EQ(model->named_parameters().size(), 1u + 8u + 2u);  // embedding, 2 LSTM layers x 4, linear
}

TEST(LibTorchHabits, TopLevelLossesMatchF) {
  manual_seed(1);
  Tensor logits = randn({6, 5});
  Tensor target = from_vector<int64_t>({0, 4, 2, 2, 1, 0});
  Tensor logp = F::log_softmax(logits, 1);
  EXPECT_TRUE(same_values(logp, log_softmax(logits, 1)));
  EXPECT_TRUE(same_values(logp, F::log_softmax(logits, F::LogSoftmaxFuncOptions(1))));
  EXPECT_TRUE(same_values(F::softmax(logits, 1), softmax(logits, 1)));
  EXPECT_EQ(F::log_softmax(logits, F::LogSoftmaxFuncOptions(1).dtype(kFloat64)).dtype(), kFloat64);
  // Top level: torch::nll_loss(input, target, weight, reduction, ignore_index).
  EXPECT_TRUE(same_values(nll_loss(logp, target), F::nll_loss(logp, target)));
  EXPECT_TRUE(same_values(cross_entropy(logits, target), F::cross_entropy(logits, target)));
  EXPECT_TRUE(same_values(cross_entropy_loss(logits, target), F::cross_entropy(logits, target)));
  EXPECT_TRUE(same_values(nll_loss(logp, target, Tensor(), kSum), F::nll_loss(logp, target, {.reduction = kSum})));
  // cross_entropy = nll_loss(log_softmax): the value, not only the spelling.
  std::vector<float> lp = logp.to_vector<float>();
  std::vector<int64_t> t = target.to_vector<int64_t>();
  double expect = 0;
  for (size_t i = 0; i < t.size(); ++i) expect -= lp[i * 5 + static_cast<size_t>(t[i])];
  EXPECT_NEAR(cross_entropy(logits, target).item(), expect / 6.0, 1e-5);
}

TEST(LibTorchHabits, FuncOptionsBuilders) {
  manual_seed(2);
  Tensor logits = randn({6, 5}).requires_grad_();
  Tensor target = from_vector<int64_t>({0, 4, 0, 2, 1, 0});  // class 0 is padding
  auto options = F::CrossEntropyFuncOptions().ignore_index(0).reduction(kMean);
  EXPECT_EQ(options.ignore_index(), 0);
  EXPECT_EQ(options.reduction(), kMean);
  Tensor loss = F::cross_entropy(logits, target, F::CrossEntropyFuncOptions().ignore_index(0));
  // Mean over the three targets that are not 0.
  std::vector<float> lp = log_softmax(logits, 1).to_vector<float>();
  const double expect = -(lp[1 * 5 + 4] + lp[3 * 5 + 2] + lp[4 * 5 + 1]) / 3.0;
  EXPECT_NEAR(loss.item(), expect, 1e-5);
  loss.backward();
  // Ignored rows get no gradient.
  std::vector<float> g = logits.grad().to_vector<float>();
  for (size_t c = 0; c < 5; ++c) EXPECT_EQ(g[c], 0.0f);
  Tensor summed = F::nll_loss(log_softmax(logits, 1), target, F::NLLLossFuncOptions().ignore_index(0).reduction(kSum));
  EXPECT_NEAR(summed.item(), expect * 3.0, 1e-4);
  // The module takes the same builder (LibTorch's CrossEntropyLossOptions).
  nn::CrossEntropyLoss criterion(nn::CrossEntropyLossOptions().ignore_index(0).label_smoothing(0.0));
  EXPECT_NEAR(criterion(logits, target).item(), expect, 1e-5);
}

TEST(LibTorchHabits, SaveAndLoadModelAndOptimizer) {
  manual_seed(3);
  WordModel model(12, 4);
  optim::Adam adam(model->parameters(), optim::AdamOptions(0.01));
  Tensor tokens = randint(0, 12, {4, 2});
  Tensor target = randint(0, 12, {4, 2});
  auto step = [&](WordModel& m, optim::Adam& opt) {
    opt.zero_grad();
    Tensor loss = nll_loss(m(tokens).view({8, 12}), target.view({8}));
    loss.backward();
    opt.step();
    return loss.item();
  };
  model->eval();
  step(model, adam);
  const std::string model_path = temp_path("model.safetensors"), optim_path = temp_path("optim.safetensors");
  save(model, model_path);
  save(adam, optim_path);

  manual_seed(99);  // a differently initialized model and a fresh optimizer
  WordModel restored(12, 4);
  restored->eval();
  optim::Adam restored_adam(restored->parameters(), optim::AdamOptions(0.5));
  load(restored, model_path);
  load(restored_adam, optim_path);
  EXPECT_DOUBLE_EQ(restored_adam.param_groups()[0].options().get_lr(), 0.01);
  // Both continue identically: the model's values and Adam's moments came back.
  const double a = step(model, adam), b = step(restored, restored_adam);
  EXPECT_EQ(a, b);
  auto pa = model->parameters(), pb = restored->parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(same_values(pa[i], pb[i])) << i;
  // A shared_ptr model and a plain module load too; a mismatched file is a ValueError.
  auto linear = std::make_shared<nn::LinearImpl>(3, 2);
  save(linear, model_path);
  nn::LinearImpl plain(3, 2);
  load(plain, model_path);
  EXPECT_TRUE(same_values(plain.weight, linear->weight));
  EXPECT_THROW(load(restored, model_path), ValueError);   // a Linear's state is not the model's
  EXPECT_THROW(load(restored_adam, model_path), ValueError);  // no optimizer state in it
  std::remove(model_path.c_str());
  std::remove(optim_path.c_str());
}

TEST(LibTorchHabits, NamedParametersItemsHaveKeyAndValue) {
  nn::Linear fc(3, 2);
  std::vector<std::string> keys;
  for (auto& p : fc->named_parameters()) {
    keys.push_back(p.key());
    EXPECT_TRUE(p.value().requires_grad());
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"weight", "bias"}));
  auto params = fc->named_parameters();
  EXPECT_EQ(params["weight"].impl(), fc->weight.impl());
  ASSERT_NE(params.find("bias"), nullptr);
  EXPECT_EQ(params.find("bias")->impl(), fc->bias.impl());
  EXPECT_EQ(params.find("nope"), nullptr);
  EXPECT_TRUE(params.contains("weight"));
  EXPECT_THROW(params["nope"], IndexError);
  EXPECT_EQ(params.keys(), keys);
  // ember's own spellings stay: structured bindings and a StateDict.
  for (auto& [name, t] : fc->named_parameters()) EXPECT_TRUE(name == "weight" || name == "bias");
  nn::StateDict sd = fc->named_parameters();
  EXPECT_EQ(sd.size(), 2u);
}

TEST(LibTorchHabits, ParamGroupLearningRateThroughItsOptions) {
  nn::Linear fc(3, 2);
  optim::SGD sgd(fc->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  // LibTorch's scheduler loop: each group's options, cast to the optimizer's options type.
  for (auto& group : sgd.param_groups()) {
    static_cast<optim::SGDOptions&>(group.options()).lr(0.05);
  }
  EXPECT_DOUBLE_EQ(static_cast<const optim::SGDOptions&>(sgd.param_groups()[0].options()).lr(), 0.05);
  sgd.param_groups()[0].options().set_lr(0.02);
  EXPECT_DOUBLE_EQ(sgd.param_groups()[0].options().get_lr(), 0.02);
  // The step uses the group's lr: w -= lr * grad on the first step (momentum buffer = grad).
  Tensor before = fc->weight.clone();
  sum(fc(ones({1, 3}))).backward();
  sgd.step();
  std::vector<float> b = before.to_vector<float>(), a = fc->weight.to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i] - 0.02f, 1e-6) << i;
  // The defaults too (what groups added later copy).
  static_cast<optim::SGDOptions&>(sgd.defaults()).lr(0.3);
  EXPECT_DOUBLE_EQ(sgd.defaults().get_lr(), 0.3);
}

}  // namespace
