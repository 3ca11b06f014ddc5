// nn::Embedding and F::embedding: N(0, 1) init with a zeroed padding row, row lookup, gradients
// that accumulate repeated indices and skip padding_idx, fused CPU kernel vs the composite
// reference, float64 gradcheck, errors.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/functional.h"
#include "nn/embedding.h"
#include "tests/nn/nn_test_util.h"

namespace ember::nn {
namespace {

using testing::all_close;
using testing::error_of;
using testing::leaf;
using testing::randn_seeded;

Tensor idx(std::vector<int64_t> v, IntList sizes) { return from_vector(v, sizes); }

TEST(Embedding, InitIsStandardNormalWithZeroPaddingRow) {
  EmbeddingImpl e(200, 50, /*padding_idx=*/3);
  auto w = e.weight.to_vector<float>();
  double s = 0, sq = 0;
  for (float v : w) {
    s += v;
    sq += v * v;
  }
  const double n = static_cast<double>(w.size());
  EXPECT_NEAR(s / n, 0.0, 0.05);
  EXPECT_NEAR(sq / n, 1.0, 0.05);
  for (int j = 0; j < 50; ++j) EXPECT_EQ(w[3 * 50 + j], 0.0f);
}

TEST(Embedding, ForwardPicksRowsForAnyIndexShape) {
  EmbeddingImpl e(5, 3);
  Tensor i = idx({4, 0, 4, 2, 1, 3}, {2, 3});
  Tensor out = e.forward(i);
  EXPECT_EQ(out.sizes(), (IntList{2, 3, 3}));
  auto w = e.weight.to_vector<float>();
  auto o = out.to_vector<float>();
  std::vector<int64_t> iv{4, 0, 4, 2, 1, 3};
  for (size_t k = 0; k < iv.size(); ++k) {
    for (size_t j = 0; j < 3; ++j) EXPECT_EQ(o[k * 3 + j], w[static_cast<size_t>(iv[k]) * 3 + j]);
  }
}

TEST(Embedding, GradientAccumulatesRepeatsAndSkipsPaddingIdx) {
  EmbeddingImpl e(4, 2, /*padding_idx=*/1);
  Tensor i = idx({1, 2, 1, 0, 2, 2}, {2, 3});
  sum(e.forward(i)).backward();
  auto g = e.weight.grad().to_vector<float>();
  std::vector<float> expected{1, 1, 0, 0, 3, 3, 0, 0};  // row 1 is padding: no gradient
  EXPECT_EQ(g, expected);
}

TEST(Embedding, FusedKernelMatchesCompositeReference) {
  for (std::optional<int64_t> pad : {std::optional<int64_t>(), std::optional<int64_t>(2)}) {
    Tensor w1 = leaf(randn_seeded({6, 4}, 7, kFloat32)), w2 = leaf(w1);
    Tensor i = idx({0, 2, 5, 2, 3, 2, 1, 0}, {4, 2});
    Tensor up = randn_seeded({4, 2, 4}, 8, kFloat32);
    Tensor a = F::embedding(i, w1, pad), b = F::detail::embedding_reference(i, w2, pad);
    EXPECT_TRUE(all_close(a, b, 0, 0));
    sum(mul(a, up)).backward();
    sum(mul(b, up)).backward();
    EXPECT_TRUE(all_close(w1.grad(), w2.grad(), 1e-6, 1e-6));
  }
}

TEST(Embedding, GradcheckFloat64WithPadding) {
  // The padding row's gradient is zero by design (a finite difference would see it), so the
  // indices avoid it here; GradientAccumulatesRepeatsAndSkipsPaddingIdx covers the padding row.
  Tensor w = leaf(randn_seeded({5, 3}, 9));
  Tensor i = idx({0, 4, 4, 1, 2, 0}, {3, 2});
  auto r = autograd::gradcheck([&](const autograd::TensorList& in) { return F::embedding(i, in[0], 3); }, {w});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Embedding, ErrorsInPyTorchWords) {
  EmbeddingImpl e(5, 3);
  EXPECT_NE(error_of([&] { e.forward(idx({1, 5}, {2})); }).find("index out of range in self"), std::string::npos);
  EXPECT_NE(error_of([&] { e.forward(idx({-1}, {1})); }).find("index out of range in self"), std::string::npos);
  EXPECT_THROW(e.forward(ones({2})), TypeError);
  EXPECT_NE(error_of([] { EmbeddingImpl(5, 3, 5); }).find("Padding_idx must be within num_embeddings"), std::string::npos);
}

TEST(Embedding, FromPretrainedCopiesAndFreezes) {
  Tensor table = randn_seeded({3, 2}, 10, kFloat32);
  auto e = EmbeddingImpl::from_pretrained(table);
  EXPECT_TRUE(testing::bit_equal(e->weight, table));
  EXPECT_FALSE(e->weight.requires_grad());
  auto trainable = EmbeddingImpl::from_pretrained(table, /*freeze=*/false, 0);
  EXPECT_TRUE(trainable->weight.requires_grad());
  EXPECT_TRUE(testing::bit_equal(trainable->weight, table));  // the padding row is not zeroed
}

}  // namespace
}  // namespace ember::nn
