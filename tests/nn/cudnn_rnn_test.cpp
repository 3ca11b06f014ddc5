// The cuDNN RNN (Note [cuDNN RNN] in core/kernels/cuda/cudnn_rnn.cpp) against the device-neutral
// fallback on the same GPU and against the CPU: LSTM, GRU and RNN tanh/relu, two layers,
// bidirectional, packed (unsorted lengths) and padded (batch_first too), with and without bias,
// float32 and float64, outputs, final states and the gradients of the input, the initial states
// and every parameter; parameters that are not views of one flat buffer (the per-call copy);
// dropout masks reproducible per manual_seed; the node that runs (the forward count under NoGrad). ctest label gpu: every test
// skips with the reason when no GPU is visible (or ember was built without cuDNN).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/generator.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"
#include "core/ops/random.h"
#include "core/ops/rnn_flat_weights.h"
#include "nn/rnn.h"
#include "nn/utils/rnn.h"
#include "tests/nn/cudnn_test_util.h"
#include "tests/support/cuda.h"

namespace ember {
namespace {
using test_support::CudnnSwitch;
using test_support::kGpu;
using test_support::leaf_on;
using test_support::seeded;
namespace R = nn::utils::rnn;



void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_TRUE(got.defined() && want.defined()) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const auto g = native::to(got, Device::cpu()).to_vector<double>();
  const auto w = native::to(want, Device::cpu()).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], w[i], tol * (1 + std::fabs(w[i]))) << what << " at " << i;
}

double tol_of(DType dt) { return dt == kFloat32 ? 5e-5 : 1e-10; }

// What one run produced: the flattened results, then the gradients of x, h0 and each parameter.
struct Run {
  Tensor result;
  std::vector<Tensor> grads;
  std::string node;
};

// Builds the module from seed 21 on `device` and dtype `dt`, runs `fwd` on x and h0 (leaves
// there), backpropagates sum(result * gy) and collects the gradients.
template <class M>
Run run_on(Device device, DType dt, bool cudnn, const std::function<std::shared_ptr<M>()>& make,
           const std::function<Tensor(M&, const Tensor&, const Tensor&, std::string&)>& fwd, const Tensor& x,
           const Tensor& h0, const std::function<void(M&)>& tweak = nullptr) {
  CudnnSwitch sw(cudnn);
  manual_seed(21);
  auto m = make();
  m->to(dt);
  m->to(device);
  if (tweak) tweak(*m);
  Tensor xl = leaf_on(native::to(x, dt), device), hl = leaf_on(native::to(h0, dt), device);
  Run r;
  r.result = fwd(*m, xl, hl, r.node);
  Tensor gy = native::to(seeded(r.result.sizes(), 11, dt), device);
  sum(mul(r.result, gy)).backward();
  r.grads.push_back(xl.grad());
  r.grads.push_back(hl.grad());
  for (const Tensor& p : m->parameters()) r.grads.push_back(p.grad());
  return r;
}

template <class M>
void check_three_ways(const std::string& what, const std::function<std::shared_ptr<M>()>& make,
                      const std::function<Tensor(M&, const Tensor&, const Tensor&, std::string&)>& fwd,
                      const IntList& x_sizes, const IntList& h_sizes,
                      const std::function<void(M&)>& tweak = nullptr) {
  for (DType dt : {kFloat32, kFloat64}) {
    const std::string w = what + (dt == kFloat32 ? " float32" : " float64");
    const Tensor x = seeded(x_sizes, 10, kFloat64), h0 = seeded(h_sizes, 12, kFloat64);
    Run cpu = run_on<M>(Device::cpu(), dt, true, make, fwd, x, h0, tweak);
    Run fallback = run_on<M>(kGpu, dt, false, make, fwd, x, h0, tweak);
    Run cudnn = run_on<M>(kGpu, dt, true, make, fwd, x, h0, tweak);
    EXPECT_EQ(cudnn.node, "CudnnRnnBackward0") << w;
    EXPECT_NE(fallback.node, "CudnnRnnBackward0") << w;
    expect_close(cudnn.result, cpu.result, tol_of(dt), w + ": cuDNN vs CPU result");
    expect_close(fallback.result, cpu.result, tol_of(dt), w + ": fallback vs CPU result");
    ASSERT_EQ(cudnn.grads.size(), cpu.grads.size());
    for (size_t i = 0; i < cpu.grads.size(); ++i) {
      const std::string g = w + ": gradient " + std::to_string(i) + " (0 input, 1 h0, then parameters)";
      expect_close(cudnn.grads[i], cpu.grads[i], tol_of(dt), g + " cuDNN vs CPU");
      expect_close(fallback.grads[i], cpu.grads[i], tol_of(dt), g + " fallback vs CPU");
    }
  }
}

std::string node_of(const Tensor& t) { return t.grad_fn() ? t.grad_fn()->name() : std::string("(none)"); }

const std::vector<int64_t> kLengths = {4, 6, 1, 6};  // unsorted: the states are permuted

TEST(CudnnRnn, LstmPackedBidirectionalTwoLayersMatchesFallbackAndCpu) {
  EMBER_REQUIRE_CUDNN();
  check_three_ways<nn::LSTMImpl>(
      "LSTM packed",
      [] { return std::make_shared<nn::LSTMImpl>(nn::LSTMOptions(5, 3).num_layers(2).bidirectional(true)); },
      [](nn::LSTMImpl& m, const Tensor& x, const Tensor& h0, std::string& node) {
        Tensor c0 = mul(h0, 0.5);
        auto [out, state] = m.forward(R::pack_padded_sequence(x, kLengths, false, false),
                                      nn::LSTMImpl::State{h0, c0});
        node = node_of(out.data);
        auto [y, len] = R::pad_packed_sequence(out, false, 0.0, 6);
        return cat({reshape(y, {-1}), reshape(std::get<0>(state), {-1}), reshape(std::get<1>(state), {-1})}, 0);
      },
      {6, 4, 5}, {4, 4, 3});
}

TEST(CudnnRnn, GruPackedBidirectionalTwoLayersWithAndWithoutBiasMatchesFallbackAndCpu) {
  EMBER_REQUIRE_CUDNN();
  for (bool bias : {true, false}) {
    check_three_ways<nn::GRUImpl>(
        std::string("GRU packed") + (bias ? "" : " no bias"),
        [bias] {
          return std::make_shared<nn::GRUImpl>(nn::GRUOptions(5, 3).num_layers(2).bidirectional(true).bias(bias));
        },
        [](nn::GRUImpl& m, const Tensor& x, const Tensor& h0, std::string& node) {
          auto [out, h] = m.forward(R::pack_padded_sequence(x, kLengths, false, false), h0);
          node = node_of(out.data);
          auto [y, len] = R::pad_packed_sequence(out, false, 0.0, 6);
          return cat({reshape(y, {-1}), reshape(h, {-1})}, 0);
        },
        {6, 4, 5}, {4, 4, 3});
  }
}

TEST(CudnnRnn, RnnTanhAndReluPaddedTwoLayersMatchFallbackAndCpu) {
  EMBER_REQUIRE_CUDNN();
  for (const char* act : {"tanh", "relu"}) {
    for (bool bidirectional : {false, true}) {
      const int64_t D = bidirectional ? 2 : 1;
      check_three_ways<nn::RNNImpl>(
          std::string("RNN ") + act + (bidirectional ? " bidirectional" : "") + " padded",
          [act, bidirectional] {
            return std::make_shared<nn::RNNImpl>(
                nn::RNNOptions(5, 3).num_layers(2).nonlinearity(act).bidirectional(bidirectional));
          },
          [](nn::RNNImpl& m, const Tensor& x, const Tensor& h0, std::string& node) {
            auto [y, h] = m.forward(x, h0);
            node = node_of(h);  // y is a view of the stack's output; h_n comes from it directly
            return cat({reshape(y, {-1}), reshape(h, {-1})}, 0);
          },
          {6, 4, 5}, {2 * D, 4, 3});
    }
  }
}

TEST(CudnnRnn, LstmPaddedBatchFirstMatchesFallbackAndCpu) {
  EMBER_REQUIRE_CUDNN();
  check_three_ways<nn::LSTMImpl>(
      "LSTM padded batch_first",
      [] { return std::make_shared<nn::LSTMImpl>(nn::LSTMOptions(5, 3).num_layers(2).batch_first(true)); },
      [](nn::LSTMImpl& m, const Tensor& x, const Tensor& h0, std::string& node) {
        auto [y, state] = m.forward(x, nn::LSTMImpl::State{h0, mul(h0, -1.0)});
        node = node_of(std::get<0>(state));
        return cat({reshape(y, {-1}), reshape(std::get<0>(state), {-1}), reshape(std::get<1>(state), {-1})}, 0);
      },
      {4, 6, 5}, {2, 4, 3});
}

TEST(CudnnRnn, ParametersOutsideTheFlatBufferAreCopiedPerCallWithTheSameResults) {
  EMBER_REQUIRE_CUDNN();
  // A parameter given storage of its own (as a user replacing it would): the cuDNN path copies
  // the weights into a weight space per call and hands the gradient back per parameter.
  check_three_ways<nn::LSTMImpl>(
      "LSTM with a replaced parameter",
      [] { return std::make_shared<nn::LSTMImpl>(nn::LSTMOptions(5, 3).num_layers(2).bidirectional(true)); },
      [](nn::LSTMImpl& m, const Tensor& x, const Tensor& h0, std::string& node) {
        EXPECT_FALSE(native::rnn_weights_are_flat(m.parameters()));
        auto [y, state] = m.forward(x, nn::LSTMImpl::State{h0, h0});
        node = node_of(std::get<0>(state));
        return cat({reshape(y, {-1}), reshape(std::get<0>(state), {-1})}, 0);
      },
      {6, 4, 5}, {4, 4, 3},
      [](nn::LSTMImpl& m) {
        NoGradGuard g;
        Tensor* w = m.find_parameter("weight_hh_l1_reverse");
        nn::Module::set_data(*w, native::clone(*w));
      });
}

TEST(CudnnRnn, DropoutMasksAreReproduciblePerSeedAndAdvanceBetweenCalls) {
  EMBER_REQUIRE_CUDNN();
  CudnnSwitch sw(true);
  manual_seed(3);
  nn::LSTMImpl lstm(nn::LSTMOptions(8, 16).num_layers(3).dropout(0.5));
  lstm.to(kGpu);
  const Tensor x = native::to(seeded({7, 5, 8}, 4, kFloat32), kGpu);
  auto out = [&] { return native::to(std::get<0>(lstm.forward(x)), Device::cpu()).to_vector<float>(); };
  manual_seed(10);
  const auto a = out();
  const auto a_next = out();
  manual_seed(10);
  const auto b = out();
  manual_seed(11);
  const auto c = out();
  EXPECT_EQ(a, b) << "the same seed gives the same masks";
  EXPECT_NE(a, a_next) << "the state advances between calls";
  EXPECT_NE(a, c) << "another seed gives other masks";
  lstm.eval();
  const auto e1 = out();
  const auto e2 = out();
  EXPECT_EQ(e1, e2) << "no dropout in eval";
  EXPECT_NE(e1, a);
  // Backward through the masks: the gradient of the input is finite and not all zero.
  lstm.train();
  Tensor xl = leaf_on(x, kGpu);
  auto [y, st] = lstm.forward(xl);
  EXPECT_EQ(node_of(std::get<0>(st)), "CudnnRnnBackward0");
  sum(y).backward();
  double norm = 0;
  for (double v : native::to(xl.grad(), Device::cpu()).to_vector<double>()) {
    ASSERT_TRUE(std::isfinite(v));
    norm += v * v;
  }
  EXPECT_GT(norm, 0);
}

TEST(CudnnRnn, EvalWithoutGradRunsCudnnAndMatchesTheFallback) {
  EMBER_REQUIRE_CUDNN();
  manual_seed(5);
  nn::GRUImpl gru(nn::GRUOptions(4, 6).num_layers(2).bidirectional(true));
  gru.to(kGpu);
  gru.eval();
  const Tensor x = native::to(seeded({5, 3, 4}, 6, kFloat32), kGpu);
  // No node records the backend under NoGradGuard: each backend's forward count does.
  Tensor y_cudnn, y_fallback;
  {
    NoGradGuard g;
    CudnnSwitch on(true);
    const uint64_t cudnn_before = native::cudnn_rnn_forward_count();
    const uint64_t layers_before = native::rnn_layer_forward_count();
    y_cudnn = std::get<0>(gru.forward(x));
    EXPECT_FALSE(y_cudnn.grad_fn());
    EXPECT_EQ(native::cudnn_rnn_forward_count(), cudnn_before + 1) << "cuDNN runs the whole stack in one call";
    EXPECT_EQ(native::rnn_layer_forward_count(), layers_before) << "and no layer of the fallback runs";
  }
  {
    NoGradGuard g;
    CudnnSwitch off(false);
    const uint64_t cudnn_before = native::cudnn_rnn_forward_count();
    const uint64_t layers_before = native::rnn_layer_forward_count();
    y_fallback = std::get<0>(gru.forward(x));
    EXPECT_EQ(native::cudnn_rnn_forward_count(), cudnn_before) << "EMBER_CUDNN off: cuDNN does not run";
    EXPECT_EQ(native::rnn_layer_forward_count(), layers_before + 2) << "the fallback runs each of the 2 layers";
  }
  expect_close(y_cudnn, y_fallback, tol_of(kFloat32), "GRU eval, no grad");
}

}  // namespace
}  // namespace ember
