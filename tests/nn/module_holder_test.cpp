// EMBER_MODULE holders (nn/module_holder.h): model(x) calls forward, -> and * reach the module,
// copies share it, register_module takes a holder, and `std::cout << *model` prints the module
// tree as PyTorch does (class name without Impl, children with their key arguments).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/module_holder.h"
#include "nn/rnn.h"
#include "tests/nn/nn_test_util.h"

namespace {
using namespace ember;
using namespace ember::nn;

struct TinyImpl : Cloneable<TinyImpl> {
  explicit TinyImpl(int64_t n = 2) : n_(n) { reset(); }
  void reset() override { fc = register_module("fc", std::make_shared<LinearImpl>(n_, 1)); }
  Tensor forward(const Tensor& x) { return fc->forward(x); }
  std::shared_ptr<LinearImpl> fc;
  int64_t n_;
};
EMBER_MODULE(Tiny);

// The word language model of PyTorch's example, in LibTorch's style.
struct RNNModelImpl : Cloneable<RNNModelImpl> {
  RNNModelImpl(int64_t ntoken, int64_t ninp, int64_t nhid) : ntoken_(ntoken), ninp_(ninp), nhid_(nhid) { reset(); }
  void reset() override {
    drop = register_module("drop", std::make_shared<DropoutImpl>(0.2));
    encoder = register_module("encoder", std::make_shared<EmbeddingImpl>(ntoken_, ninp_));
    rnn = register_module("rnn", std::make_shared<LSTMImpl>(LSTMOptions(ninp_, nhid_).num_layers(2).dropout(0.2)));
    decoder = register_module("decoder", Tiny(nhid_));  // a holder registers like a shared_ptr
  }
  Tensor forward(const Tensor& tokens) {
    auto [out, state] = rnn->forward(drop->forward(encoder->forward(tokens)));
    return decoder(out);
  }
  std::shared_ptr<DropoutImpl> drop;
  std::shared_ptr<EmbeddingImpl> encoder;
  std::shared_ptr<LSTMImpl> rnn;
  Tiny decoder{nullptr};
  int64_t ntoken_, ninp_, nhid_;
};
EMBER_MODULE(RNNModel);

TEST(ModuleHolder, CallsForwardAndReachesTheModule) {
  Tiny m(3);
  Tensor x = ones({4, 3});
  Tensor y = m(x);
  EXPECT_EQ(y.sizes(), (IntList{4, 1}));
  EXPECT_EQ(y.to_vector<float>(), m->forward(x).to_vector<float>());
  EXPECT_EQ(m->parameters().size(), 2u);
  EXPECT_EQ((*m).fc->in_features(), 3);
  Tiny copy = m;  // shares the module, as LibTorch's holders do
  EXPECT_EQ(copy.get(), m.get());
  Tiny fresh;  // the default constructor builds TinyImpl()
  EXPECT_EQ(fresh->fc->in_features(), 2);
  std::shared_ptr<TinyImpl> p = m;
  EXPECT_EQ(p.get(), m.get());
}

TEST(ModuleHolder, EveryCloneableIsCallableLikeLibTorchModules) {
  LinearImpl fc(3, 2);
  Tensor x = ones({4, 3});
  EXPECT_EQ(fc(x).to_vector<float>(), fc.forward(x).to_vector<float>());
  auto lstm = std::make_shared<LSTMImpl>(3, 5);
  auto [out, state] = (*lstm)(ones({2, 1, 3}));
  EXPECT_EQ(out.sizes(), (IntList{2, 1, 5}));
}

TEST(ModuleHolder, EmptyHolderIsATypedError) {
  Tiny empty(nullptr);
  EXPECT_TRUE(empty.is_empty());
  EXPECT_FALSE(static_cast<bool>(empty));
  EXPECT_THAT(nn::testing::error_of([&] { empty(ones({1, 2})); }), ::testing::HasSubstr("empty holder"));
}

TEST(ModuleHolder, PrintsTheModuleTreeLikePyTorch) {
  RNNModel model(10, 4, 6);
  std::ostringstream os;
  os << *model;
  EXPECT_EQ(os.str(),
            "RNNModel(\n"
            "  (drop): Dropout(p=0.2, inplace=False)\n"
            "  (encoder): Embedding(10, 4)\n"
            "  (rnn): LSTM(4, 6, num_layers=2, dropout=0.2)\n"
            "  (decoder): Tiny(\n"
            "    (fc): Linear(in_features=6, out_features=1, bias=True)\n"
            "  )\n"
            ")");
  std::ostringstream holder;
  holder << model;
  EXPECT_EQ(holder.str(), os.str());
  EXPECT_EQ(model(from_vector<int64_t>({1, 2, 3, 4}, {2, 2})).sizes(), (IntList{2, 2, 1}));
}

TEST(ModuleHolder, RegisteredHolderIsAChildAndClonesDeeply) {
  RNNModel model(10, 4, 6);
  EXPECT_EQ(model->named_parameters().front().first, "encoder.weight");
  auto clone = std::dynamic_pointer_cast<RNNModelImpl>(model->clone());
  ASSERT_NE(clone, nullptr);
  EXPECT_NE(clone->decoder.get(), model->decoder.get());
  EXPECT_EQ(clone->decoder->fc->weight.to_vector<float>(), model->decoder->fc->weight.to_vector<float>());
}

}  // namespace
