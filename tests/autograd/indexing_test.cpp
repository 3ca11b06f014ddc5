// Tensor::index / index_put_ with Slice, None, Ellipsis, integers, bools and index tensors.
// Expected values were computed with PyTorch 1.13 (Debian's python3-torch) on
// x = torch.arange(24.).reshape(2, 3, 4) when this test was written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "autograd/indexing.h"
#include "autograd/ops.h"
#include "core/ops/native.h"
#include "tests/support/error_text.h"

using namespace ember;
using namespace ember::indexing;
using ::testing::HasSubstr;

namespace {
Tensor x24() { return reshape(arange(0.0, 24.0, 1.0, kFloat32), {2, 3, 4}); }
Tensor longs(std::vector<int64_t> v, IntList sizes = {}) { return from_vector(v, sizes); }
Tensor bools(std::vector<bool> v, IntList sizes = {}) { return from_vector(v, sizes); }

struct Expect {
  IntList sizes;
  std::vector<float> values;
};
void expect_tensor(const Tensor& t, const Expect& e) {
  EXPECT_EQ(t.sizes(), e.sizes);
  EXPECT_EQ(t.to_vector<float>(), e.values);
}
}  // namespace

TEST(Indexing, BasicTermsMatchPyTorch) {
  Tensor x = x24();
  expect_tensor(x.index({Slice(0, 1), 1}), {{1, 4}, {4, 5, 6, 7}});                         // x[0:1, 1]
  expect_tensor(x.index({Ellipsis, 2}), {{2, 3}, {2, 6, 10, 14, 18, 22}});                  // x[..., 2]
  expect_tensor(x.index({"...", 2}), {{2, 3}, {2, 6, 10, 14, 18, 22}});
  expect_tensor(x.index({None, 1, Slice(None, None, 2)}), {{1, 2, 4}, {12, 13, 14, 15, 20, 21, 22, 23}});
  expect_tensor(x.index({-1, -1}), {{4}, {20, 21, 22, 23}});                                // x[-1, -1]
  EXPECT_EQ(x.index({true}).sizes(), (IntList{1, 2, 3, 4}));
  EXPECT_EQ(x.index({false}).sizes(), (IntList{0, 2, 3, 4}));
  EXPECT_EQ(x.index({Slice(1, None), Slice(-2)}).sizes(), (IntList{1, 2, 4}));             // x[1:, -2:]
  EXPECT_EQ(x.index({Slice(5, 100)}).sizes(), (IntList{0, 3, 4}));                          // clamped like Python
}

TEST(Indexing, BasicIndexingIsAView) {
  Tensor x = x24();
  Tensor v = x.index({1, Slice(), 0});
  EXPECT_EQ(v.storage().data(), x.storage().data());
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{12, 16, 20}));
}

TEST(Indexing, TensorTermsMatchPyTorch) {
  Tensor x = x24();
  expect_tensor(x.index({1, longs({2, 0, 2})}),
                {{3, 4}, {20, 21, 22, 23, 12, 13, 14, 15, 20, 21, 22, 23}});                // x[1, i]
  expect_tensor(x.index({Slice(), longs({0, 2}), longs({1, 3})}), {{2, 2}, {1, 11, 13, 23}});  // adjacent
  expect_tensor(x.index({longs({0, 1}), Slice(), longs({1, 3})}),
                {{2, 3}, {1, 5, 9, 15, 19, 23}});                                           // not adjacent: in front
  expect_tensor(x.index({gt(x, tensor({10.0}))}),
                {{13}, {11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}});              // x[x > 10]
  expect_tensor(x.index({bools({true, false})}), {{1, 3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}});
  Tensor mask = bools({true, false, true, false, false, true, false, false, false, false, false, true}, {3, 4});
  expect_tensor(x.index({Slice(), mask}), {{2, 4}, {0, 2, 5, 11, 12, 14, 17, 23}});
  expect_tensor(x.index({longs({0, 1}, {2, 1}), longs({0, 2})}),
                {{2, 2, 4}, {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 20, 21, 22, 23}});   // broadcast indices
  expect_tensor(x.index({1, from_vector<int32_t>({-1})}), {{1, 4}, {20, 21, 22, 23}});
}

TEST(Indexing, OutOfRangeIsATypedErrorNamingDimAndSize) {
  Tensor x = x24();
  EXPECT_THAT(support::error_of<IndexError>([&] { x.index({0, 3}); }),
              HasSubstr("index 3 is out of bounds for dimension 1 with size 3"));
  EXPECT_THAT(support::error_of<IndexError>([&] { x.index({Ellipsis, longs({4})}); }),
              HasSubstr("index 4 is out of bounds for dimension 2 with size 4"));
  EXPECT_THAT(support::error_of<IndexError>([&] { x.index({0, 0, 0, 0}); }),
              HasSubstr("too many indices for tensor of dimension 3"));
  EXPECT_THAT(support::error_of<IndexError>([&] { x.index({Ellipsis, 0, Ellipsis}); }),
              HasSubstr("single ellipsis"));
  EXPECT_THAT(support::error_of<IndexError>([&] { x.index({bools({true, false, true})}); }),
              HasSubstr("the shape of the mask [3] at index 0 does not match the shape of the indexed tensor [2]"));
  EXPECT_THROW(x.index({tensor({0.0})}), TypeError);
  EXPECT_THROW(Slice(0, 4, 0), ValueError);
  EXPECT_THROW(x.index({"..x"}), ValueError);
}

TEST(Indexing, IndexPutMatchesPyTorch) {
  Tensor y = zeros({2, 3, 4});
  y.index_put_({Slice(), longs({0, 2}), longs({1, 3})}, tensor({1, 2, 3, 4}, {2, 2}));
  std::vector<float> want(24, 0.f);
  want[1] = 1, want[11] = 2, want[13] = 3, want[23] = 4;
  EXPECT_EQ(y.to_vector<float>(), want);

  Tensor z = zeros({2, 3, 4});
  z.index_put_({longs({0, 1}), Slice(), longs({1, 3})}, tensor({5, 6, 7}));  // value broadcast over [2, 3]
  std::vector<float> want_z(24, 0.f);
  want_z[1] = 5, want_z[5] = 6, want_z[9] = 7, want_z[15] = 5, want_z[19] = 6, want_z[23] = 7;
  EXPECT_EQ(z.to_vector<float>(), want_z);

  Tensor acc = zeros({5});
  acc.index_put_({longs({1, 1, 3})}, tensor({1, 2, 3}), /*accumulate=*/true);
  EXPECT_EQ(acc.to_vector<float>(), (std::vector<float>{0, 3, 0, 3, 0}));

  Tensor b = x24();
  b.index_put_({Slice(), 0}, -1.0);  // basic: writes through the view
  EXPECT_EQ(b.index({1, 0}).to_vector<float>(), (std::vector<float>{-1, -1, -1, -1}));
  b.index_put_({gt(b, tensor({20.0}))}, 0.0);  // full mask and a number: masked_fill_
  EXPECT_EQ(b.index({1, 2}).to_vector<float>(), (std::vector<float>{20, 0, 0, 0}));
}

TEST(Indexing, IndexPutChecksBeforeWriting) {
  Tensor y = zeros({4});
  EXPECT_THROW(y.index_put_({longs({0, 9})}, tensor({1, 2})), IndexError);
  EXPECT_THAT(support::error_of<ValueError>([&] { y.index_put_({longs({0, 1})}, tensor({1, 2, 3})); }),
              HasSubstr("value tensor of shape [3] cannot be broadcast to indexing result of shape [2]"));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 0, 0, 0}));
  Tensor leaf = zeros({4}).requires_grad_();
  EXPECT_THAT(support::error_of([&] { leaf.index_put_({0}, 1.0); }), HasSubstr("a leaf Variable that requires grad"));
}

TEST(Indexing, IndexIsDifferentiable) {
  Tensor idx = longs({2, 0, 2});
  Tensor mask = bools({true, false, true, true});
  auto f = [&](const autograd::TensorList& in) {
    const Tensor& a = in[0];
    return add(sum(a.index({Slice(1, 3), idx})), sum(mul(a.index({0, mask}), a.index({None, -1, Slice(None, 3)}))));
  };
  Tensor a = native::add(native::mul(rand({3, 4}, TensorOptions(kFloat64)), 2.0), -1.0);
  a.requires_grad_();
  auto r = autograd::gradcheck(f, {a});
  EXPECT_TRUE(r) << r.message;
}

TEST(Indexing, IndexPutIsDifferentiableForValueAndNonLeafSelf) {
  auto f = [](const autograd::TensorList& in) {
    Tensor base = mul(in[0], 2.0);  // non-leaf, so it may be written in place
    base.index_put_({Slice(), from_vector<int64_t>({0, 2})}, in[1]);
    base.index_put_({1, 1}, in[1].index({0, 0}), /*accumulate=*/true);
    return sum(mul(base, base));
  };
  Tensor a = native::add(rand({3, 4}, TensorOptions(kFloat64)), -0.5);
  Tensor v = native::add(rand({3, 2}, TensorOptions(kFloat64)), -0.5);
  a.requires_grad_();
  v.requires_grad_();
  auto r = autograd::gradcheck(f, {a, v});
  EXPECT_TRUE(r) << r.message;
}
