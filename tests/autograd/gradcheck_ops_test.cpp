// Every differentiable op through gradcheck (float64 finite differences), one table row each.
#include <gtest/gtest.h>

#include <functional>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/ops/native.h"

using namespace ember;
using autograd::TensorList;

namespace {
Tensor rnd(const IntList& s, double lo = -1, double hi = 1, uint64_t seed = 1) {
  Generator g(seed);
  Tensor t = rand(s, TensorOptions(kFloat64), &g);
  t = native::add(native::mul(t, hi - lo), lo);
  t.requires_grad_(true);
  return t;
}
Tensor positive(const IntList& s, uint64_t seed = 2) { return rnd(s, 0.5, 2.0, seed); }

struct Case {
  const char* name;
  std::function<Tensor(const TensorList&)> f;
  std::function<TensorList()> inputs;
};

std::vector<Case> cases() {
  auto two = [](IntList a, IntList b) { return [a, b] { return TensorList{rnd(a, -1, 1, 3), rnd(b, -1, 1, 4)}; }; };
  auto one = [](IntList a) { return [a] { return TensorList{rnd(a, -1, 1, 5)}; }; };
  auto one_pos = [](IntList a) { return [a] { return TensorList{positive(a)}; }; };
  Tensor idx = from_vector<int64_t>({2, 0, 2});
  Tensor gidx = from_vector<int64_t>({0, 2, 1, 1, 0, 0}, {2, 3});
  Tensor cond = from_vector<bool>({true, false, true, false, false, true}, {2, 3});
  return {
      {"add_broadcast", [](const TensorList& x) { return add(x[0], x[1], 0.5); }, two({3, 1, 4}, {2, 1})},
      {"sub", [](const TensorList& x) { return sub(x[0], x[1]); }, two({2, 3}, {3})},
      {"mul_broadcast", [](const TensorList& x) { return mul(x[0], x[1]); }, two({2, 3}, {2, 1})},
      {"div", [](const TensorList& x) { return div(x[0], add(mul(x[1], x[1]), 1.0)); }, two({2, 3}, {2, 3})},
      {"pow_tensor", [](const TensorList& x) { return pow(x[0], x[1]); },
       [] { return TensorList{positive({4}, 7), rnd({4}, -1, 1, 8)}; }},
      {"maximum", [](const TensorList& x) { return maximum(x[0], x[1]); }, two({5}, {5})},
      {"minimum", [](const TensorList& x) { return minimum(x[0], x[1]); }, two({5}, {5})},
      {"scalar_ops", [](const TensorList& x) { return rsub(div(mul(add(x[0], 2.0), 3.0), 4.0), 1.0); }, one({3})},
      {"pow_scalar", [](const TensorList& x) { return pow(x[0], 3.0); }, one({4})},
      {"neg_abs", [](const TensorList& x) { return abs(neg(x[0])); }, one({4})},
      {"exp", [](const TensorList& x) { return exp(x[0]); }, one({4})},
      {"log", [](const TensorList& x) { return log(x[0]); }, one_pos({4})},
      {"log1p", [](const TensorList& x) { return log1p(x[0]); }, one_pos({4})},
      {"sqrt", [](const TensorList& x) { return sqrt(x[0]); }, one_pos({4})},
      {"rsqrt", [](const TensorList& x) { return rsqrt(x[0]); }, one_pos({4})},
      {"reciprocal", [](const TensorList& x) { return reciprocal(x[0]); }, one_pos({4})},
      {"sin_cos", [](const TensorList& x) { return add(sin(x[0]), cos(x[0])); }, one({4})},
      {"tanh", [](const TensorList& x) { return tanh(x[0]); }, one({4})},
      {"sigmoid", [](const TensorList& x) { return sigmoid(x[0]); }, one({4})},
      {"relu", [](const TensorList& x) { return relu(x[0]); }, one({6})},
      {"gelu", [](const TensorList& x) { return gelu(x[0]); }, one({6})},
      {"clamp", [](const TensorList& x) { return clamp(x[0], -0.5, 0.5); }, one({6})},
      {"where", [cond](const TensorList& x) { return where(cond, x[0], x[1]); }, two({2, 3}, {3})},
      {"masked_fill", [cond](const TensorList& x) { return masked_fill(x[0], cond, 7.0); }, one({2, 3})},
      {"to_device", [](const TensorList& x) { return mul(to(x[0], Device("cpu:1")), 2.0); }, one({3})},
      {"sum_dims", [](const TensorList& x) { return sum(x[0], {0, 2}); }, one({2, 3, 4})},
      {"sum_keepdim", [](const TensorList& x) { return sum(x[0], {-1}, true); }, one({2, 3})},
      {"mean", [](const TensorList& x) { return mean(x[0], {1}); }, one({2, 3})},
      {"amax", [](const TensorList& x) { return amax(x[0], {1}); }, one({3, 4})},
      {"amin", [](const TensorList& x) { return amin(x[0]); }, one({3, 4})},
      {"max_dim", [](const TensorList& x) { return max(x[0], 1).first; }, one({3, 4})},
      {"min_dim_keepdim", [](const TensorList& x) { return min(x[0], 0, true).first; }, one({3, 4})},
      {"var", [](const TensorList& x) { return var(x[0], {1}); }, one({3, 4})},
      {"norm", [](const TensorList& x) { return norm(x[0]); }, one({5})},
      {"mm", [](const TensorList& x) { return mm(x[0], x[1]); }, two({2, 3}, {3, 4})},
      {"mm_transposed", [](const TensorList& x) { return mm(t(x[0]), t(x[1])); }, two({3, 2}, {4, 3})},
      {"bmm", [](const TensorList& x) { return bmm(x[0], x[1]); }, two({2, 2, 3}, {2, 3, 2})},
      {"matmul_3d_2d", [](const TensorList& x) { return matmul(x[0], x[1]); }, two({2, 3, 4}, {4, 2})},
      {"matmul_broadcast", [](const TensorList& x) { return matmul(x[0], x[1]); }, two({2, 1, 2, 3}, {3, 3, 2})},
      {"matmul_vec", [](const TensorList& x) { return matmul(x[0], x[1]); }, two({3}, {3, 2})},
      {"addmm", [](const TensorList& x) { return addmm(x[2], x[0], x[1], 0.5, 2.0); },
       [] { return TensorList{rnd({2, 3}, -1, 1, 1), rnd({3, 4}, -1, 1, 2), rnd({4}, -1, 1, 3)}; }},
      {"linear", [](const TensorList& x) { return linear(x[0], x[1], x[2]); },
       [] { return TensorList{rnd({2, 5, 3}, -1, 1, 1), rnd({4, 3}, -1, 1, 2), rnd({4}, -1, 1, 3)}; }},
      {"view_reshape", [](const TensorList& x) { return reshape(view(x[0], {6, 2}), {3, 4}); }, one({2, 6})},
      {"reshape_noncontig", [](const TensorList& x) { return reshape(t(x[0]), {-1}); }, one({2, 3})},
      {"transpose_permute", [](const TensorList& x) { return permute(transpose(x[0], 0, 2), {1, 0, 2}); }, one({2, 3, 4})},
      {"narrow_select", [](const TensorList& x) { return select(narrow(x[0], 1, 1, 2), 0, 1); }, one({2, 4})},
      {"slice_step", [](const TensorList& x) { return slice(x[0], 1, 0, 5, 2); }, one({2, 5})},
      {"expand", [](const TensorList& x) { return expand(x[0], {3, 2, 4}); }, one({2, 1})},
      {"squeeze_unsqueeze", [](const TensorList& x) { return unsqueeze(squeeze(x[0], 1), 0); }, one({3, 1, 2})},
      {"flatten", [](const TensorList& x) { return flatten(x[0], 1); }, one({2, 3, 2})},
      {"cat", [](const TensorList& x) { return cat({x[0], x[1]}, 1); }, two({2, 3}, {2, 1})},
      {"stack", [](const TensorList& x) { return stack({x[0], x[1]}, 1); }, two({2, 3}, {2, 3})},
      {"split_chunk", [](const TensorList& x) {
         auto a = split(x[0], 2, 1);
         auto b = chunk(x[0], 3, 0);
         return add(mul(a[1], 2.0), sum(b[2]));
       }, one({3, 4})},
      {"index_select", [idx](const TensorList& x) { return index_select(x[0], 0, idx); }, one({3, 2})},
      {"gather", [gidx](const TensorList& x) { return gather(x[0], 1, gidx); }, one({2, 3})},
      {"scatter_add", [gidx](const TensorList& x) { return scatter_add(x[0], 1, gidx, x[1]); }, two({2, 3}, {2, 3})},
      {"softmax", [](const TensorList& x) { return softmax(x[0], 1); }, one({2, 4})},
      {"log_softmax", [](const TensorList& x) { return log_softmax(x[0], 0); }, one({3, 2})},
      {"clone_contiguous", [](const TensorList& x) { return contiguous(clone(t(x[0]))); }, one({2, 3})},
      {"inplace_on_nonleaf", [](const TensorList& x) {
         Tensor y = mul(x[0], 2.0);
         add_(y, x[1]);
         mul_(y, 3.0);
         return y;
       }, two({3}, {3})},
  };
}
}  // namespace

class GradcheckOps : public ::testing::TestWithParam<size_t> {};

TEST_P(GradcheckOps, AnalyticMatchesNumeric) {
  auto c = cases()[GetParam()];
  auto r = autograd::gradcheck(c.f, c.inputs());
  EXPECT_TRUE(r.ok) << c.name << ": " << r.message;
}

INSTANTIATE_TEST_SUITE_P(AllOps, GradcheckOps, ::testing::Range<size_t>(0, cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& i) { return std::string(cases()[i.param].name); });

TEST(Gradcheck, DetectsAWrongGradient) {
  // A custom op whose backward is deliberately wrong must fail gradcheck.
  auto bad = [](const TensorList& x) {
    Tensor out = native::mul(x[0], x[0]);
    autograd::record("BadSquareBackward", {&x[0]}, {&out}, [](autograd::FunctionNode&, TensorList& g) {
      return TensorList{g[0]};  // should be 2x * g
    });
    return out;
  };
  auto r = autograd::gradcheck(bad, {rnd({3})});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("Jacobian mismatch"), std::string::npos);
}
