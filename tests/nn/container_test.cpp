// Sequential, ModuleList, ModuleDict: forward chaining, naming, indexing errors, insertion
// renumbering, replacement keeps position, and deep clones.
#include <gtest/gtest.h>

#include "autograd/ops.h"
#include "nn/activation.h"
#include "nn/container.h"
#include "nn/linear.h"
#include "tests/nn/nn_test_util.h"

namespace ember::nn {
namespace {

using testing::all_close;
using testing::bit_equal;

TEST(Sequential, ForwardChainsChildrenInOrder) {
  auto l1 = std::make_shared<LinearImpl>(3, 4);
  auto l2 = std::make_shared<LinearImpl>(4, 2);
  SequentialImpl net(l1, ReLUImpl());
  net.push_back("out", l2);
  Tensor x = testing::randn_seeded({5, 3}, 1, kFloat32);
  EXPECT_TRUE(all_close(net.forward(x), l2->forward(relu(l1->forward(x))), 0, 0));
  EXPECT_EQ(net.size(), 3u);
  EXPECT_EQ(net.named_children()[2].first, "out");
  EXPECT_EQ(net[-1].get(), l2.get());
  EXPECT_THROW(net[3], IndexError);
  EXPECT_THROW(net.ptr<LinearImpl>(1), TypeError);
  EXPECT_TRUE(SequentialImpl().forward(x).is_same(x));
}

TEST(Sequential, CloneIsDeepAndForwardsThroughTheCopies) {
  SequentialImpl net(std::make_shared<LinearImpl>(3, 4), TanhImpl(), std::make_shared<LinearImpl>(4, 1));
  net.eval();
  auto copy = std::static_pointer_cast<SequentialImpl>(net.clone());
  EXPECT_FALSE(copy->is_training());
  Tensor x = testing::randn_seeded({2, 3}, 2, kFloat32);
  EXPECT_TRUE(bit_equal(copy->forward(x), net.forward(x)));
  {
    NoGradGuard ng;
    native::fill_(copy->ptr<LinearImpl>(2)->bias, 100.0);
  }
  EXPECT_FALSE(bit_equal(copy->forward(x), net.forward(x)));
  EXPECT_NE(copy->ptr<LinearImpl>(0).get(), net.ptr<LinearImpl>(0).get());
}

TEST(ModuleList, InsertRenumbersAndParametersFollow) {
  ModuleListImpl list(std::make_shared<LinearImpl>(1, 2), std::make_shared<LinearImpl>(2, 3));
  list.insert(1, std::make_shared<LinearImpl>(5, 5, false));
  EXPECT_EQ(list.size(), 3u);
  auto names = list.named_parameters();
  ASSERT_EQ(names.size(), 5u);
  EXPECT_EQ(names[0].first, "0.weight");
  EXPECT_EQ(names[2].first, "1.weight");
  EXPECT_EQ(names[2].second.sizes(), (IntList{5, 5}));
  EXPECT_EQ(names[3].first, "2.weight");
  auto copy = std::static_pointer_cast<ModuleListImpl>(list.clone());
  EXPECT_EQ(copy->named_parameters().size(), 5u);
  EXPECT_FALSE(copy->parameters()[0].is_same(list.parameters()[0]));
  EXPECT_TRUE(bit_equal(copy->parameters()[0], list.parameters()[0]));
  int n = 0;
  for (const auto& m : list) n += m != nullptr;
  EXPECT_EQ(n, 3);
}

TEST(ModuleDict, InsertReplacePopAndClone) {
  ModuleDictImpl d({{"enc", std::make_shared<LinearImpl>(2, 2)}, {"act", std::make_shared<ReLUImpl>()}});
  EXPECT_EQ(d.keys(), (std::vector<std::string>{"enc", "act"}));
  d.insert("enc", std::make_shared<LinearImpl>(3, 3));  // replacement keeps the position
  EXPECT_EQ(d.keys(), (std::vector<std::string>{"enc", "act"}));
  EXPECT_EQ(d.ptr<LinearImpl>("enc")->in_features(), 3);
  EXPECT_EQ(d.named_parameters()[0].first, "enc.weight");
  EXPECT_TRUE(d.contains("act"));
  d.pop("act");
  EXPECT_FALSE(d.contains("act"));
  EXPECT_THROW(d["act"], IndexError);
  auto copy = std::static_pointer_cast<ModuleDictImpl>(d.clone());
  EXPECT_EQ(copy->keys(), d.keys());
  EXPECT_NE(copy->ptr<LinearImpl>("enc").get(), d.ptr<LinearImpl>("enc").get());
  EXPECT_TRUE(bit_equal(copy->ptr<LinearImpl>("enc")->weight, d.ptr<LinearImpl>("enc")->weight));
}

}  // namespace
}  // namespace ember::nn
