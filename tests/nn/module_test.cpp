// nn::Module behaviour through real layers: state_dict names and load errors, clone() deep
// copies without re-initialization, train/eval, to(dtype), zero_grad, parameters of containers.
#include <gtest/gtest.h>

#include <sstream>

#include "autograd/ops.h"
#include "nn/activation.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/optim/sgd.h"
#include "tests/nn/nn_test_util.h"

namespace ember::nn {
namespace {

using testing::bit_equal;
using testing::error_of;

std::shared_ptr<SequentialImpl> mlp() {
  return std::make_shared<SequentialImpl>(std::make_shared<LinearImpl>(2, 3), ReLUImpl(), std::make_shared<LinearImpl>(3, 1));
}

std::vector<std::string> keys(const StateDict& sd) {
  std::vector<std::string> out;
  for (auto& [k, v] : sd) out.push_back(k);
  return out;
}

TEST(Module, StateDictUsesPyTorchNamesForNestedContainers) {
  auto net = mlp();
  EXPECT_EQ(keys(net->state_dict()), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(net->parameters().size(), 4u);
  auto ln = LayerNormImpl({4}, 1e-5, false);
  EXPECT_TRUE(ln.state_dict().empty());
}

// Regression (tied input/output embeddings listed twice: SGD refused the list and
// clip_grad_norm_ counted the gradient twice): a tensor registered in two modules is one
// parameter under its first name; state_dict keeps both keys, as PyTorch's does.
TEST(Module, TiedWeightIsOneParameterUnderItsFirstName) {
  SequentialImpl net(std::make_shared<EmbeddingImpl>(5, 3), std::make_shared<LinearImpl>(3, 5));
  auto emb = std::dynamic_pointer_cast<EmbeddingImpl>(net.children()[0]);
  auto dec = std::dynamic_pointer_cast<LinearImpl>(net.children()[1]);
  dec->weight = emb->weight;
  *dec->find_parameter("weight") = emb->weight;
  EXPECT_EQ(keys(net.named_parameters()), (std::vector<std::string>{"0.weight", "1.bias"}));
  EXPECT_EQ(net.parameters().size(), 2u);
  EXPECT_TRUE(net.parameters()[0].is_same(emb->weight));
  EXPECT_EQ(keys(net.named_parameters(true, /*remove_duplicate=*/false)),
            (std::vector<std::string>{"0.weight", "1.weight", "1.bias"}));
  EXPECT_EQ(keys(net.state_dict()), (std::vector<std::string>{"0.weight", "1.weight", "1.bias"}));
  EXPECT_NO_THROW(optim::SGD(net.parameters(), optim::SGDOptions(0.1)));
}

TEST(Module, LoadStateDictErrorListsMissingUnexpectedAndMismatchedKeys) {
  auto net = mlp();
  StateDict sd = net->state_dict();
  sd.erase(sd.begin() + 1);                       // drop 0.bias
  sd.emplace_back("3.weight", zeros({1}));        // unexpected
  sd[0].second = zeros({5, 2});                   // 0.weight with the wrong shape
  Tensor before = native::clone(net->state_dict()[2].second);
  std::string msg = error_of([&] { net->load_state_dict(sd); });
  EXPECT_NE(msg.find("Error(s) in loading state_dict for Sequential"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Missing key(s) in state_dict: \"0.bias\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("Unexpected key(s) in state_dict: \"3.weight\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("size mismatch for 0.weight: copying a param with shape [5, 2] from checkpoint, the shape in "
                     "current model is [3, 2]."),
            std::string::npos)
      << msg;
  // Nothing was copied, not even the keys that matched.
  EXPECT_TRUE(bit_equal(net->state_dict()[2].second, before));
}

// Issue 19, item 5: an undefined tensor was dereferenced; a key given twice was applied twice.
TEST(Module, LoadStateDictNamesAnUndefinedTensorsKeyAndChangesNothing) {
  auto net = mlp();
  StateDict sd = net->state_dict();
  for (auto& [k, t] : sd) t = native::add(t, 1.0);
  sd[1].second = Tensor();
  Tensor before = native::clone(net->state_dict()[0].second);
  for (bool strict : {true, false}) {
    std::string msg = error_of([&] { net->load_state_dict(sd, strict); });
    EXPECT_NE(msg.find("the tensor for key \"0.bias\" is undefined"), std::string::npos) << msg;
    EXPECT_THROW(net->load_state_dict(sd, strict), ValueError);
  }
  EXPECT_TRUE(bit_equal(net->state_dict()[0].second, before));
}

TEST(Module, LoadStateDictRefusesADuplicateKey) {
  auto net = mlp();
  StateDict sd = net->state_dict();
  sd.emplace_back(sd[0].first, zeros_like(sd[0].second));
  Tensor before = native::clone(net->state_dict()[0].second);
  std::string msg = error_of([&] { net->load_state_dict(sd); });
  EXPECT_NE(msg.find("key \"0.weight\" appears more than once"), std::string::npos) << msg;
  EXPECT_THROW(net->validate_state_dict(sd, false), ValueError);
  EXPECT_TRUE(bit_equal(net->state_dict()[0].second, before));
}

TEST(Module, LoadStateDictNonStrictToleratesMissingAndUnexpectedKeys) {
  auto a = mlp(), b = mlp();
  StateDict sd = a->state_dict();
  sd.erase(sd.begin());
  sd.emplace_back("extra", zeros({1}));
  b->load_state_dict(sd, /*strict=*/false);
  EXPECT_TRUE(bit_equal(b->state_dict()[1].second, a->state_dict()[1].second));
  EXPECT_FALSE(bit_equal(b->state_dict()[0].second, a->state_dict()[0].second));
}

TEST(Module, CloneDeepCopiesWithoutDrawingRandomNumbers) {
  auto net = mlp();
  auto before = default_generator().get_state();
  auto copy = std::static_pointer_cast<SequentialImpl>(net->clone());
  EXPECT_EQ(default_generator().get_state(), before) << "clone() re-initialized parameters";
  auto a = net->state_dict(), b = copy->state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(bit_equal(a[i].second, b[i].second)) << a[i].first;
    EXPECT_FALSE(a[i].second.is_same(b[i].second));
    EXPECT_NE(a[i].second.raw_data(), b[i].second.raw_data());
    EXPECT_TRUE(b[i].second.requires_grad());
    EXPECT_TRUE(b[i].second.is_leaf());
  }
  // The clone's typed members point at its own parameters.
  auto l0 = copy->ptr<LinearImpl>(0);
  EXPECT_TRUE(l0->weight.is_same(copy->parameters()[0]));
  Tensor original = native::clone(net->ptr<LinearImpl>(0)->weight);
  {
    NoGradGuard ng;
    native::fill_(l0->weight, 7.0);
  }
  EXPECT_TRUE(bit_equal(net->ptr<LinearImpl>(0)->weight, original));
  // Forward of the clone works and is independent.
  Tensor x = ones({4, 2});
  EXPECT_EQ(copy->forward(x).sizes(), (IntList{4, 1}));
}

TEST(Module, CloneKeepsEmbeddingPaddingAndLayerNormShape) {
  EmbeddingImpl e(5, 3, /*padding_idx=*/-1);
  EXPECT_EQ(e.padding_idx(), 4);
  auto c = e.clone_as();
  EXPECT_EQ(c->padding_idx(), 4);
  EXPECT_TRUE(bit_equal(c->weight, e.weight));
  LayerNormImpl ln({2, 3});
  auto lc = ln.clone_as();
  EXPECT_EQ(lc->weight.sizes(), (IntList{2, 3}));
}

TEST(Module, TrainAndEvalPropagateToChildrenAndControlDropout) {
  SequentialImpl net(std::make_shared<LinearImpl>(4, 4), DropoutImpl(0.5));
  EXPECT_TRUE(net.is_training());
  net.eval();
  EXPECT_FALSE(net[1]->is_training());
  Tensor x = ones({8, 4});
  Tensor h = net.ptr<LinearImpl>(0)->forward(x);
  EXPECT_TRUE(bit_equal(net.forward(x), h));  // dropout is the identity in eval
  net.train();
  EXPECT_TRUE(net[1]->is_training());
  Tensor y = net.ptr<DropoutImpl>(1)->forward(ones({1000}));
  auto v = y.to_vector<float>();
  int zeros_n = 0;
  for (float f : v) {
    if (f == 0.0f) {
      ++zeros_n;
    } else {
      EXPECT_FLOAT_EQ(f, 2.0f);
    }
  }
  EXPECT_GT(zeros_n, 400);
  EXPECT_LT(zeros_n, 600);
}

TEST(Module, ToDtypeConvertsInPlaceAndKeepsHandles) {
  LinearImpl lin(3, 2);
  Tensor w = lin.weight;
  Tensor before = native::to(lin.weight, kFloat64);
  lin.to(kFloat64);
  EXPECT_EQ(lin.weight.dtype(), kFloat64);
  EXPECT_EQ(w.dtype(), kFloat64);  // same TensorImpl
  EXPECT_TRUE(bit_equal(lin.weight, before));
  Tensor y = lin.forward(ones({4, 3}, TensorOptions(kFloat64)));
  EXPECT_EQ(y.dtype(), kFloat64);
  sum(y).backward();
  EXPECT_EQ(lin.weight.grad().dtype(), kFloat64);
}

TEST(Module, ZeroGradSetsToNoneOrZeroes) {
  LinearImpl lin(3, 2);
  sum(lin.forward(ones({2, 3}))).backward();
  ASSERT_TRUE(lin.weight.grad().defined());
  lin.zero_grad(/*set_to_none=*/false);
  ASSERT_TRUE(lin.weight.grad().defined());
  for (float v : lin.weight.grad().to_vector<float>()) EXPECT_EQ(v, 0.0f);
  lin.zero_grad();
  EXPECT_FALSE(lin.weight.grad().defined());
  EXPECT_FALSE(lin.bias.grad().defined());
}

TEST(Module, PrettyPrintMatchesPyTorchRepr) {
  SequentialImpl net(std::make_shared<LinearImpl>(2, 3), ReLUImpl(), DropoutImpl(0.1), std::make_shared<LinearImpl>(3, 1, false),
                 TanhImpl(), SigmoidImpl(), GELUImpl());
  std::ostringstream os;
  os << net;
  EXPECT_EQ(os.str(),
            "Sequential(\n"
            "  (0): Linear(in_features=2, out_features=3, bias=True)\n"
            "  (1): ReLU()\n"
            "  (2): Dropout(p=0.1, inplace=False)\n"
            "  (3): Linear(in_features=3, out_features=1, bias=False)\n"
            "  (4): Tanh()\n"
            "  (5): Sigmoid()\n"
            "  (6): GELU(approximate='none')\n"
            ")");
  std::ostringstream e, l;
  e << EmbeddingImpl(10, 3, 0);
  l << LayerNormImpl({4});
  EXPECT_EQ(e.str(), "Embedding(10, 3, padding_idx=0)");
  EXPECT_EQ(l.str(), "LayerNorm((4,), eps=1e-05, elementwise_affine=True)");
  SequentialImpl outer(std::make_shared<SequentialImpl>(ReLUImpl()), TanhImpl());
  std::ostringstream o;
  o << outer;
  EXPECT_EQ(o.str(), "Sequential(\n  (0): Sequential(\n    (0): ReLU()\n  )\n  (1): Tanh()\n)");
}

}  // namespace
}  // namespace ember::nn
