// nn::RNN / LSTM / GRU: parameter layout and init, values and gradients against a plain
// reference built from differentiable ember ops one sequence and one step at a time,
// float64 gradcheck (packed, bidirectional, 2 layers), packed vs padded consistency,
// enforce_sorted=false vs manual sorting, batch_first / unbatched forms, dropout, errors.
#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "tests/support/error_text.h"
#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "core/thread_pool.h"
#include "nn/rnn.h"

namespace ember::nn {
namespace {

using ::testing::HasSubstr;
using utils::rnn::pack_padded_sequence;
using utils::rnn::pad_packed_sequence;
using Mode = detail::RnnMode;

using support::error_of;

Tensor randn64(const IntList& sizes) { return native::to(randn(sizes), kFloat64); }

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  auto x = native::to(a, kFloat64).to_vector<double>(), y = native::to(b, kFloat64).to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

// ---- the plain reference: one sequence, one layer-direction, one step at a time ----------------

struct RefOut {
  Tensor output;  // [T, B, D*H], zeros past each length
  Tensor h_n, c_n;
};

// weights in flat order; x [T, B, F]; h0/c0 [L*D, B, H]. Uses only differentiable ember ops.
RefOut reference(Mode mode, const std::vector<Tensor>& w, int64_t L, int64_t D, bool bias, const Tensor& x,
                 const std::vector<int64_t>& lengths, const Tensor& h0, const Tensor& c0) {
  const int64_t T = x.size(0), B = x.size(1), H = h0.size(2);
  const int64_t per = bias ? 4 : 2;
  std::vector<Tensor> outs, hn(static_cast<size_t>(L * D * B)), cn(static_cast<size_t>(L * D * B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = lengths[static_cast<size_t>(b)];
    Tensor in = narrow(select(x, 1, b), 0, 0, len);  // [len, F]
    for (int64_t l = 0; l < L; ++l) {
      std::vector<Tensor> dir_out;
      for (int64_t d = 0; d < D; ++d) {
        const size_t k = static_cast<size_t>((l * D + d) * per);
        const Tensor &w_ih = w[k], &w_hh = w[k + 1];
        Tensor b_ih = bias ? w[k + 2] : Tensor(), b_hh = bias ? w[k + 3] : Tensor();
        Tensor h = narrow(select(h0, 0, l * D + d), 0, b, 1);  // [1, H]
        Tensor c = mode == Mode::kLstm ? narrow(select(c0, 0, l * D + d), 0, b, 1) : Tensor();
        std::vector<Tensor> steps(static_cast<size_t>(len));
        for (int64_t s = 0; s < len; ++s) {
          const int64_t t = d == 1 ? len - 1 - s : s;
          Tensor xt = narrow(in, 0, t, 1);
          Tensor gi = linear(xt, w_ih, b_ih), gh = linear(h, w_hh, b_hh);
          if (mode == Mode::kLstm) {
            auto g = chunk(add(gi, gh), 4, 1);
            Tensor i = sigmoid(g[0]), f = sigmoid(g[1]), gg = tanh(g[2]), o = sigmoid(g[3]);
            c = add(mul(f, c), mul(i, gg));
            h = mul(o, tanh(c));
          } else if (mode == Mode::kGru) {
            auto a = chunk(gi, 3, 1), bb = chunk(gh, 3, 1);
            Tensor r = sigmoid(add(a[0], bb[0])), z = sigmoid(add(a[1], bb[1]));
            Tensor n = tanh(add(a[2], mul(r, bb[2])));
            h = add(mul(rsub(z, 1.0), n), mul(z, h));
          } else {
            Tensor pre = add(gi, gh);
            h = mode == Mode::kRnnRelu ? relu(pre) : tanh(pre);
          }
          steps[static_cast<size_t>(t)] = h;
        }
        hn[static_cast<size_t>((l * D + d) * B + b)] = h;
        if (mode == Mode::kLstm) cn[static_cast<size_t>((l * D + d) * B + b)] = c;
        dir_out.push_back(cat(steps, 0));
      }
      in = D == 1 ? dir_out[0] : cat(dir_out, 1);
    }
    if (len < T) in = cat({in, zeros({T - len, D * H}, TensorOptions(x.dtype()))}, 0);
    outs.push_back(in);
  }
  RefOut r;
  r.output = stack(outs, 1);
  auto stack_states = [&](std::vector<Tensor>& v) {
    std::vector<Tensor> rows;
    for (int64_t ld = 0; ld < L * D; ++ld) {
      std::vector<Tensor> per_b(v.begin() + ld * B, v.begin() + (ld + 1) * B);
      rows.push_back(cat(per_b, 0));
    }
    return stack(rows, 0);
  };
  r.h_n = stack_states(hn);
  if (mode == Mode::kLstm) r.c_n = stack_states(cn);
  return r;
}

// Runs a module through pack (enforce_sorted=false) -> forward -> pad, like the users do.
template <class M>
RefOut run_packed(M& m, const Tensor& x, const std::vector<int64_t>& lengths, const Tensor& h0, const Tensor& c0,
                  int64_t total_length) {
  auto packed = pack_padded_sequence(x, lengths, false, /*enforce_sorted=*/false);
  RefOut r;
  if constexpr (std::is_same_v<M, LSTMImpl>) {
    auto [out, state] = m.forward(packed, LSTMImpl::State{h0, c0});
    r.output = std::get<0>(pad_packed_sequence(out, false, 0.0, total_length));
    r.h_n = std::get<0>(state);
    r.c_n = std::get<1>(state);
  } else {
    auto [out, h] = m.forward(packed, h0);
    r.output = std::get<0>(pad_packed_sequence(out, false, 0.0, total_length));
    r.h_n = h;
  }
  return r;
}

struct Case {
  const char* name;
  Mode mode;
  int64_t layers;
  bool bidirectional;
  bool bias;
};

template <class M, class Opts>
std::shared_ptr<M> make_module(const Case& c, int64_t F, int64_t H) {
  Opts o(F, H);
  o.num_layers(c.layers).bidirectional(c.bidirectional).bias(c.bias);
  if constexpr (std::is_same_v<Opts, RNNOptions>) o.nonlinearity(c.mode == Mode::kRnnRelu ? "relu" : "tanh");
  auto m = std::make_shared<M>(o);
  m->to(kFloat64);
  return m;
}

template <class M, class Opts>
void check_against_reference(const Case& c) {
  SCOPED_TRACE(c.name);
  const int64_t T = 5, B = 4, F = 3, H = 4, D = c.bidirectional ? 2 : 1;
  auto m = make_module<M, Opts>(c, F, H);
  std::vector<int64_t> lengths{3, 5, 1, 3};
  Tensor x = randn64({T, B, F}), h0 = randn64({c.layers * D, B, H}), c0 = randn64({c.layers * D, B, H});
  for (Tensor* t : {&x, &h0, &c0}) t->requires_grad_(true);
  const bool lstm = c.mode == Mode::kLstm;
  RefOut got = run_packed(*m, x, lengths, h0, lstm ? c0 : Tensor(), T + 1);
  RefOut want = reference(c.mode, m->flat_weights(), c.layers, D, c.bias, x, lengths, h0, c0);
  want.output = cat({want.output, zeros({1, B, D * H}, TensorOptions(kFloat64))}, 0);
  EXPECT_LT(max_abs_diff(got.output, want.output), 1e-12);
  EXPECT_LT(max_abs_diff(got.h_n, want.h_n), 1e-12);
  if (lstm) {
    EXPECT_LT(max_abs_diff(got.c_n, want.c_n), 1e-12);
  }

  // Same upstream gradients through both: every input and weight gradient must agree.
  Tensor gy = randn64(got.output.sizes()), gh = randn64(got.h_n.sizes()), gc = randn64(got.h_n.sizes());
  auto loss = [&](const RefOut& r) {
    Tensor l = add(sum(mul(r.output, gy)), sum(mul(r.h_n, gh)));
    return lstm ? add(l, sum(mul(r.c_n, gc))) : l;
  };
  autograd::TensorList wrt{x, h0};
  if (lstm) wrt.push_back(c0);
  for (const Tensor& w : m->flat_weights()) wrt.push_back(w);
  auto g_got = autograd::grad({loss(got)}, wrt);
  auto g_want = autograd::grad({loss(want)}, wrt);
  auto names = m->named_parameters();
  for (size_t i = 0; i < wrt.size(); ++i) {
    std::string what = i == 0 ? "input" : i == 1 ? "h0" : (lstm && i == 2) ? "c0" : names[i - (lstm ? 3 : 2)].first;
    EXPECT_LT(max_abs_diff(g_got[i], g_want[i]), 1e-11) << what;
  }
}

TEST(RNNModules, MatchPlainReferenceValuesAndGradients) {
  manual_seed(1);
  const std::vector<Case> cases{
      {"lstm 2 layers bidirectional", Mode::kLstm, 2, true, true},
      {"lstm 1 layer no bias", Mode::kLstm, 1, false, false},
      {"gru 2 layers bidirectional", Mode::kGru, 2, true, true},
      {"gru 1 layer no bias", Mode::kGru, 1, false, false},
      {"rnn tanh 2 layers bidirectional", Mode::kRnnTanh, 2, true, true},
      {"rnn relu 2 layers", Mode::kRnnRelu, 2, false, true},
  };
  for (const Case& c : cases) {
    if (c.mode == Mode::kLstm) {
      check_against_reference<LSTMImpl, LSTMOptions>(c);
    } else if (c.mode == Mode::kGru) {
      check_against_reference<GRUImpl, GRUOptions>(c);
    } else {
      check_against_reference<RNNImpl, RNNOptions>(c);
    }
  }
}

// float32 layers with enough steps run their recurrent products through PackedRhs (on CPUs
// with AVX2 or AVX-512; core/kernels/cpu/packed_gemm.h), float64 ones through BLAS: the same module in both
// dtypes must agree on outputs, states and every gradient, for each mode, with and without
// biases, bidirectional, over packed sequences whose batch shrinks step by step.
template <class M, class Opts>
void check_float32_against_float64(const Case& c) {
  SCOPED_TRACE(c.name);
  const int64_t T = 23, B = 19, F = 11, H = 37, D = c.bidirectional ? 2 : 1;  // H: a partial panel
  auto m64 = make_module<M, Opts>(c, F, H);
  auto m32 = std::static_pointer_cast<M>(m64->clone());
  m32->to(kFloat32);
  std::vector<int64_t> lengths;
  for (int64_t b = 0; b < B; ++b) lengths.push_back(1 + (b * 5) % T);
  lengths[3] = T;
  Tensor x = randn64({T, B, F}), h0 = randn64({c.layers * D, B, H}), c0 = randn64({c.layers * D, B, H});
  const bool lstm = c.mode == Mode::kLstm;
  auto leaf = [](const Tensor& t, DType dt) {
    Tensor l = native::to(t, dt);
    l.requires_grad_(true);
    return l;
  };
  std::vector<RefOut> outs;
  std::vector<autograd::TensorList> grads;
  for (DType dt : {kFloat32, kFloat64}) {
    M& m = dt == kFloat32 ? *m32 : *m64;
    autograd::TensorList wrt{leaf(x, dt), leaf(h0, dt)};
    if (lstm) wrt.push_back(leaf(c0, dt));
    RefOut r = run_packed(m, wrt[0], lengths, wrt[1], lstm ? wrt[2] : Tensor(), T);
    for (const Tensor& w : m.flat_weights()) wrt.push_back(w);
    Tensor loss = add(sum(mul(r.output, r.output)), sum(r.h_n));
    if (lstm) loss = add(loss, sum(r.c_n));
    grads.push_back(autograd::grad({loss}, wrt));
    outs.push_back(r);
  }
  EXPECT_LT(max_abs_diff(outs[0].output, outs[1].output), 2e-5);
  EXPECT_LT(max_abs_diff(outs[0].h_n, outs[1].h_n), 2e-5);
  if (lstm) {
    EXPECT_LT(max_abs_diff(outs[0].c_n, outs[1].c_n), 2e-5);
  }
  auto names = m64->named_parameters();
  for (size_t i = 0; i < grads[0].size(); ++i) {
    std::string what = i == 0 ? "input" : i == 1 ? "h0" : (lstm && i == 2) ? "c0" : names[i - (lstm ? 3 : 2)].first;
    const double scale = 1.0 + native::amax(native::abs(grads[1][i])).item();
    EXPECT_LT(max_abs_diff(grads[0][i], grads[1][i]) / scale, 2e-5) << what;
  }
}

TEST(RNNModules, Float32LayersMatchFloat64OnLongPackedSequences) {
  manual_seed(3);
  check_float32_against_float64<LSTMImpl, LSTMOptions>({"lstm 2 layers bidirectional", Mode::kLstm, 2, true, true});
  check_float32_against_float64<LSTMImpl, LSTMOptions>({"lstm no bias", Mode::kLstm, 1, false, false});
  check_float32_against_float64<GRUImpl, GRUOptions>({"gru 2 layers bidirectional", Mode::kGru, 2, true, true});
  check_float32_against_float64<GRUImpl, GRUOptions>({"gru no bias", Mode::kGru, 1, false, false});
  check_float32_against_float64<RNNImpl, RNNOptions>({"rnn tanh bidirectional", Mode::kRnnTanh, 1, true, true});
}

// gradcheck over the input, the states and every weight, through pack -> module -> pad.
template <class M, class Opts>
void gradcheck_module(const Case& c) {
  SCOPED_TRACE(c.name);
  const int64_t T = 3, B = 3, F = 2, H = 2, D = c.bidirectional ? 2 : 1;
  auto m = make_module<M, Opts>(c, F, H);
  const bool lstm = c.mode == Mode::kLstm;
  std::vector<int64_t> lengths{2, 3, 1};
  autograd::TensorList inputs{randn64({T, B, F}), randn64({c.layers * D, B, H}), randn64({c.layers * D, B, H})};
  auto named = m->named_parameters();
  for (auto& [n, p] : named) inputs.push_back(detach(p));
  for (Tensor& t : inputs) t.requires_grad_(true);
  auto f = [&](const autograd::TensorList& in) {
    for (size_t i = 0; i < named.size(); ++i) *m->find_parameter(named[i].first) = in[3 + i];
    RefOut r = run_packed(*m, in[0], lengths, in[1], lstm ? in[2] : Tensor(), T);
    std::vector<Tensor> parts{reshape(r.output, {-1}), reshape(r.h_n, {-1})};
    if (lstm) parts.push_back(reshape(r.c_n, {-1}));
    return cat(parts, 0);
  };
  if (!lstm) inputs[2] = detach(inputs[2]);  // unused: keep it out of the check
  auto res = autograd::gradcheck(f, inputs);
  EXPECT_TRUE(res.ok) << res.message;
}

TEST(RNNModules, GradcheckPackedBidirectionalTwoLayers) {
  manual_seed(2);
  gradcheck_module<LSTMImpl, LSTMOptions>({"lstm", Mode::kLstm, 2, true, true});
  gradcheck_module<GRUImpl, GRUOptions>({"gru", Mode::kGru, 2, true, true});
  gradcheck_module<RNNImpl, RNNOptions>({"rnn tanh", Mode::kRnnTanh, 2, true, true});
  gradcheck_module<RNNImpl, RNNOptions>({"rnn relu", Mode::kRnnRelu, 1, true, false});
}

TEST(RNNModules, ParameterNamesShapesAndOrderFollowPyTorch) {
  LSTMImpl lstm(LSTMOptions(3, 4).num_layers(2).bidirectional(true));
  std::vector<std::pair<std::string, IntList>> expect{
      {"weight_ih_l0", {16, 3}},         {"weight_hh_l0", {16, 4}},         {"bias_ih_l0", {16}},
      {"bias_hh_l0", {16}},              {"weight_ih_l0_reverse", {16, 3}}, {"weight_hh_l0_reverse", {16, 4}},
      {"bias_ih_l0_reverse", {16}},      {"bias_hh_l0_reverse", {16}},      {"weight_ih_l1", {16, 8}},
      {"weight_hh_l1", {16, 4}},         {"bias_ih_l1", {16}},              {"bias_hh_l1", {16}},
      {"weight_ih_l1_reverse", {16, 8}}, {"weight_hh_l1_reverse", {16, 4}}, {"bias_ih_l1_reverse", {16}},
      {"bias_hh_l1_reverse", {16}}};
  auto named = lstm.named_parameters();
  ASSERT_EQ(named.size(), expect.size());
  for (size_t i = 0; i < expect.size(); ++i) {
    EXPECT_EQ(named[i].first, expect[i].first);
    EXPECT_EQ(named[i].second.sizes(), expect[i].second) << expect[i].first;
    EXPECT_TRUE(named[i].second.requires_grad());
  }
  GRUImpl gru(GRUOptions(5, 6).bias(false));
  auto g = gru.named_parameters();
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].first, "weight_ih_l0");
  EXPECT_EQ(g[0].second.sizes(), (IntList{18, 5}));
  EXPECT_EQ(g[1].second.sizes(), (IntList{18, 6}));
  RNNImpl rnn(2, 3);
  EXPECT_EQ(rnn.named_parameters()[0].second.sizes(), (IntList{3, 2}));
}

TEST(RNNModules, DefaultInitIsUniformWithinOneOverSqrtHidden) {
  LSTMImpl lstm(LSTMOptions(10, 16).num_layers(2));
  const double bound = 1.0 / 4.0;
  double lo = 1, hi = -1;
  for (const Tensor& p : lstm.parameters()) {
    for (double v : native::to(p, kFloat64).to_vector<double>()) {
      EXPECT_LE(std::abs(v), bound);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  EXPECT_LT(lo, -0.2);
  EXPECT_GT(hi, 0.2);
}

TEST(RNNModules, CloneCopiesValuesWithoutDrawingRandomNumbers) {
  LSTMImpl lstm(LSTMOptions(3, 4).num_layers(2).bidirectional(true));
  manual_seed(5);
  auto copy = lstm.clone_as();
  Tensor after_clone = rand({4});
  manual_seed(5);
  Tensor without_clone = rand({4});
  EXPECT_EQ(after_clone.to_vector<float>(), without_clone.to_vector<float>());
  auto a = lstm.named_parameters(), b = copy->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.to_vector<float>(), b[i].second.to_vector<float>());
    EXPECT_FALSE(a[i].second.storage().data() == b[i].second.storage().data());
  }
  // Under SkipInitGuard, construction leaves the generator untouched too.
  manual_seed(6);
  {
    detail::SkipInitGuard skip;
    GRUImpl gru(GRUOptions(3, 4));
  }
  Tensor r1 = rand({4});
  manual_seed(6);
  EXPECT_EQ(r1.to_vector<float>(), rand({4}).to_vector<float>());
}

TEST(RNNModules, PackedMatchesPaddedForEqualLengthsAndValidSteps) {
  manual_seed(3);
  LSTMImpl lstm(LSTMOptions(3, 5).num_layers(2).bidirectional(true));
  Tensor x = randn({6, 4, 3});
  auto [out_pad, st_pad] = lstm.forward(x);
  auto packed = pack_padded_sequence(x, std::vector<int64_t>{6, 6, 6, 6});
  auto [out_pk, st_pk] = lstm.forward(packed);
  EXPECT_LT(max_abs_diff(std::get<0>(pad_packed_sequence(out_pk)), out_pad), 1e-6);
  EXPECT_LT(max_abs_diff(std::get<0>(st_pk), std::get<0>(st_pad)), 1e-6);
  EXPECT_LT(max_abs_diff(std::get<1>(st_pk), std::get<1>(st_pad)), 1e-6);

  // Unidirectional: the padded run agrees with the packed one on every valid step.
  GRUImpl gru(GRUOptions(3, 5));
  std::vector<int64_t> lengths{6, 4, 4, 1};
  auto [g_pad, h_pad] = gru.forward(x);
  auto [g_pk, h_pk] = gru.forward(pack_padded_sequence(x, lengths));
  Tensor unpacked = std::get<0>(pad_packed_sequence(g_pk));
  auto u = unpacked.to_vector<float>(), p = g_pad.to_vector<float>();
  for (int64_t t = 0; t < 6; ++t)
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t k = 0; k < 5; ++k) {
        size_t i = static_cast<size_t>((t * 4 + b) * 5 + k);
        if (t < lengths[static_cast<size_t>(b)]) {
          EXPECT_NEAR(u[i], p[i], 1e-6);
        } else {
          EXPECT_EQ(u[i], 0.0f);
        }
      }
}

TEST(RNNModules, EnforceSortedFalseMatchesManuallySortedBatch) {
  manual_seed(4);
  LSTMImpl lstm(LSTMOptions(3, 4).num_layers(2).bidirectional(true));
  Tensor x = randn({5, 4, 3}), h0 = randn({4, 4, 4}), c0 = randn({4, 4, 4});
  std::vector<int64_t> lengths{2, 5, 3, 4};
  auto [out, st] = lstm.forward(pack_padded_sequence(x, lengths, false, false), LSTMImpl::State{h0, c0});
  auto [padded, lens] = pad_packed_sequence(out);
  EXPECT_EQ(lens.to_vector<int64_t>(), lengths);

  Tensor order = from_vector<int64_t>({1, 3, 2, 0});
  auto [out_s, st_s] = lstm.forward(pack_padded_sequence(native::index_select(x, 1, order), std::vector<int64_t>{5, 4, 3, 2}),
                                    LSTMImpl::State{native::index_select(h0, 1, order), native::index_select(c0, 1, order)});
  Tensor padded_s = std::get<0>(pad_packed_sequence(out_s));
  EXPECT_LT(max_abs_diff(native::index_select(padded, 1, order), padded_s), 1e-6);
  EXPECT_LT(max_abs_diff(native::index_select(std::get<0>(st), 1, order), std::get<0>(st_s)), 1e-6);
  EXPECT_LT(max_abs_diff(native::index_select(std::get<1>(st), 1, order), std::get<1>(st_s)), 1e-6);
}

TEST(RNNModules, BatchFirstAndUnbatchedAgreeWithTimeMajor) {
  manual_seed(7);
  GRUImpl tm(GRUOptions(3, 4).num_layers(2));
  GRUImpl bf(GRUOptions(3, 4).num_layers(2).batch_first(true));
  bf.load_state_dict(tm.state_dict());
  Tensor x = randn({5, 2, 3}), h0 = randn({2, 2, 4});
  auto [y_tm, h_tm] = tm.forward(x, h0);
  auto [y_bf, h_bf] = bf.forward(native::contiguous(native::transpose(x, 0, 1)), h0);
  EXPECT_EQ(y_bf.sizes(), (IntList{2, 5, 4}));
  EXPECT_LT(max_abs_diff(native::transpose(y_bf, 0, 1), y_tm), 1e-6);
  EXPECT_LT(max_abs_diff(h_bf, h_tm), 1e-6);

  auto [y_u, h_u] = tm.forward(native::select(x, 1, 1), native::select(h0, 1, 1));
  EXPECT_EQ(y_u.sizes(), (IntList{5, 4}));
  EXPECT_EQ(h_u.sizes(), (IntList{2, 4}));
  EXPECT_LT(max_abs_diff(y_u, native::select(y_tm, 1, 1)), 1e-6);
  EXPECT_LT(max_abs_diff(h_u, native::select(h_tm, 1, 1)), 1e-6);
}

TEST(RNNModules, ThreadCountDoesNotChangeResults) {
  manual_seed(8);
  LSTMImpl lstm(LSTMOptions(16, 64).num_layers(2));
  Tensor x = randn({12, 32, 16});
  std::vector<int64_t> lengths;
  for (int64_t b = 0; b < 32; ++b) lengths.push_back(1 + (b * 7) % 12);
  const int saved = get_num_threads();
  std::vector<std::vector<float>> outs, grads;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor xi = detach(x);
    xi.requires_grad_(true);
    auto [out, st] = lstm.forward(pack_padded_sequence(xi, lengths, false, false));
    sum(mul(out.data, out.data)).backward();
    outs.push_back(out.data.to_vector<float>());
    grads.push_back(xi.grad().to_vector<float>());
  }
  set_num_threads(saved);
  ASSERT_EQ(outs[0].size(), outs[1].size());
  for (size_t i = 0; i < outs[0].size(); ++i) ASSERT_NEAR(outs[0][i], outs[1][i], 1e-5);
  for (size_t i = 0; i < grads[0].size(); ++i) ASSERT_NEAR(grads[0][i], grads[1][i], 1e-4);
}

// DataParallel on CPU runs replicas on logical devices cpu:1, cpu:2, ...: every tensor the layer
// makes (outputs, default states, saved buffers, gradients) must live on the input's device.
TEST(RNNModules, StaysOnTheInputsLogicalCpuDevice) {
  const Device dev = Device::cpu(1);
  LSTMImpl lstm(LSTMOptions(3, 4).num_layers(2).bidirectional(true));
  lstm.to(dev);
  Tensor x = native::to(randn({5, 3, 3}), dev);
  x.requires_grad_(true);
  auto packed = pack_padded_sequence(x, std::vector<int64_t>{5, 2, 4}, false, false);
  EXPECT_EQ(packed.data.device(), dev);
  auto [out, st] = lstm.forward(packed);
  auto [padded, lens] = pad_packed_sequence(out);
  EXPECT_EQ(padded.device(), dev);
  EXPECT_EQ(std::get<0>(st).device(), dev);
  EXPECT_EQ(std::get<1>(st).device(), dev);
  add(sum(padded), sum(std::get<1>(st))).backward();
  EXPECT_EQ(x.grad().device(), dev);
  for (const Tensor& p : lstm.parameters()) EXPECT_EQ(p.grad().device(), dev);
  GRUImpl gru(3, 4);
  gru.to(dev);
  auto [y, h] = gru.forward(native::to(randn({2, 3, 3}), dev));
  EXPECT_EQ(y.device(), dev);
  EXPECT_EQ(h.device(), dev);
}

TEST(RNNModules, DropoutOnlyBetweenLayersAndOnlyWhileTraining) {
  manual_seed(9);
  LSTMImpl lstm(LSTMOptions(3, 8).num_layers(2).dropout(0.5));
  Tensor x = randn({4, 2, 3});
  lstm.eval();
  auto a = std::get<0>(lstm.forward(x)), b = std::get<0>(lstm.forward(x));
  EXPECT_EQ(max_abs_diff(a, b), 0.0);
  lstm.train();
  auto c = std::get<0>(lstm.forward(x)), d = std::get<0>(lstm.forward(x));
  EXPECT_GT(max_abs_diff(c, d), 1e-4);
  // One layer: there is no "between", so dropout changes nothing.
  LSTMImpl one(LSTMOptions(3, 8).dropout(0.5));
  EXPECT_EQ(max_abs_diff(std::get<0>(one.forward(x)), std::get<0>(one.forward(x))), 0.0);
}

TEST(RNNModules, RetainGraphAllowsASecondBackwardAndWithoutItIsAnError) {
  LSTMImpl lstm(3, 4);
  Tensor x = randn({3, 2, 3});
  auto [y, st] = lstm.forward(x);
  Tensor loss = sum(y);
  loss.backward(Tensor(), /*retain_graph=*/true);
  auto g1 = lstm.parameters()[0].grad().to_vector<float>();
  loss.backward();
  auto g2 = lstm.parameters()[0].grad().to_vector<float>();
  for (size_t i = 0; i < g1.size(); ++i) EXPECT_NEAR(g2[i], 2 * g1[i], 1e-6);
  EXPECT_THAT(error_of([&] { loss.backward(); }), HasSubstr("backward through the graph a second time"));
}

// Regression (issue 20): a backward through a freed LSTM layer said "in backward of
// LSTMLayerBackward0: LSTMLayerBackward0: trying to backward ...".
TEST(RNNModules, FreedLayerErrorNamesTheNodeOnce) {
  LSTMImpl lstm(3, 4);
  auto [y, st] = lstm.forward(randn({3, 2, 3}));
  const Tensor h_n = std::get<0>(st);  // one layer: the layer node's own output
  sum(h_n).backward();                 // frees the layer's saved tensors
  const std::string text = error_of([&] { sum(h_n).backward(); });
  EXPECT_THAT(text, ::testing::StartsWith("in backward of LSTMLayerBackward0: trying to backward through the graph a "
                                          "second time"));
  EXPECT_EQ(support::count_of(text, "LSTMLayerBackward0"), 1u) << text;
}

TEST(RNNModules, ModifyingAWeightBeforeBackwardIsDetected) {
  LSTMImpl lstm(3, 4);
  auto [y, st] = lstm.forward(randn({3, 2, 3}));
  {
    NoGradGuard g;
    Tensor w = lstm.parameters()[1];
    native::mul_(w, 2.0);
  }
  EXPECT_THAT(error_of([&] { sum(y).backward(); }), HasSubstr("modified by an inplace operation"));
}

TEST(RNNModules, ErrorsNameWhatWasExpected) {
  LSTMImpl lstm(3, 4);
  EXPECT_THAT(error_of([&] { lstm.forward(zeros({2, 3, 5})); }),
              HasSubstr("input.size(-1) must be equal to input_size. Expected 3, got 5"));
  EXPECT_THAT(error_of([&] { lstm.forward(zeros({2, 3, 3}), LSTMImpl::State{zeros({1, 3, 5}), zeros({1, 3, 4})}); }),
              HasSubstr("Expected hidden[0] size (1, 3, 4), got [1, 3, 5]"));
  EXPECT_THAT(error_of([&] { lstm.forward(zeros({2, 3, 3}), LSTMImpl::State{zeros({1, 3, 4}), zeros({1, 2, 4})}); }),
              HasSubstr("Expected hidden[1] size (1, 3, 4), got [1, 2, 4]"));
  EXPECT_THAT(error_of([&] { lstm.forward(zeros({2, 3, 3}), LSTMImpl::State{zeros({1, 3, 4}), Tensor()}); }),
              HasSubstr("expected both h0 and c0"));
  GRUImpl gru(3, 4);
  EXPECT_THAT(error_of([&] { gru.forward(zeros({2, 3, 3}), zeros({1, 2, 4})); }),
              HasSubstr("Expected hidden size (1, 3, 4), got [1, 2, 4]"));
  EXPECT_THAT(error_of([&] { gru.forward(zeros({2, 3, 3, 3})); }), HasSubstr("GRU: Expected input to be 2D or 3D, got 4D"));
  EXPECT_THAT(error_of([&] { gru.forward(zeros({2, 3}), zeros({1, 2, 4})); }),
              HasSubstr("For unbatched 2-D input, hx should also be 2-D but got 3-D tensor"));
  EXPECT_THAT(error_of([&] { gru.forward(zeros({2, 3, 3}, kFloat64)); }), HasSubstr("but a parameter is float32"));
  EXPECT_THAT(error_of([] { RNNImpl(RNNOptions(3, 4).nonlinearity("gelu")); }),
              HasSubstr("Unknown nonlinearity 'gelu'. Select from 'tanh' or 'relu'."));
  EXPECT_THROW(LSTMImpl(LSTMOptions(3, 4).dropout(1.5)), ValueError);
  EXPECT_THROW(LSTMImpl(LSTMOptions(3, 0)), ValueError);
  EXPECT_THROW(LSTMImpl(LSTMOptions(3, 4).num_layers(0)), ValueError);
}

TEST(RNNModules, PrettyPrintLikePyTorch) {
  std::ostringstream os;
  LSTMImpl(LSTMOptions(32, 256).num_layers(2).batch_first(true)).pretty_print(os);
  EXPECT_EQ(os.str(), "LSTM(32, 256, num_layers=2, batch_first=True)");
  std::ostringstream os2;
  GRUImpl(GRUOptions(3, 4).bias(false).bidirectional(true)).pretty_print(os2);
  EXPECT_EQ(os2.str(), "GRU(3, 4, bias=False, bidirectional=True)");
}

}  // namespace
}  // namespace ember::nn
