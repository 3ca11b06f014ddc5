// CUDA-vs-CPU columns of the nn layer ops of the GPU path (issue 15 item 2): Embedding forward
// and its deterministic backward (padding_idx, repeated indices, int32 indices), the packed-row
// gather behind pack_padded_sequence / pad_packed_sequence / permute_batch (lengths on either
// device, a PackedSequence moved to the GPU), layer_norm forward and backward, and RNN / LSTM /
// GRU layers over cuBLAS and the cell kernels (packed and padded, bidirectional, two layers);
// float32 and float64, values and gradients, and the typed errors on the GPU. The CPU
// grid-emulation tests (tests/core/launch_grid_nn_test.cpp) cover the kernel bodies everywhere;
// these prove the launches on a GPU and skip without one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/nested.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"
#include "core/ops/random.h"
#include "nn/functional.h"
#include "nn/rnn.h"
#include "nn/utils/rnn.h"
#include "tests/support/cuda.h"
#include "tests/support/error_text.h"

namespace ember {
namespace {
using test_support::kGpu;
using test_support::leaf_on;
using test_support::seeded;
using nn::utils::rnn::PackedSequence;

// got (on the GPU) against want (on the CPU): |got - want| <= tol * (1 + |want|).
void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_TRUE(got.defined() && want.defined()) << what;
  ASSERT_EQ(got.device(), kGpu) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const auto g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], w[i], tol * (1 + std::fabs(w[i]))) << what << " at " << i;
}

double tol_of(DType dt) { return dt == kFloat32 ? 2e-5 : 1e-10; }

TEST(CudaNnOps, EmbeddingForwardAndBackwardMatchCpuAndTheBackwardIsDeterministic) {
  EMBER_REQUIRE_CUDA();
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor w = native::t(seeded({6, 11}, 1, dt));  // [11, 6], non-contiguous
    Tensor idx = from_vector<int64_t>({3, 0, 10, 3, 3, 5, 0, 2, 10, 3, 7, 1}, {3, 4});
    for (std::optional<int64_t> pad : {std::optional<int64_t>(), std::optional<int64_t>(3)}) {
      for (DType idt : {kInt64, kInt32}) {
        const std::string what = std::string(dt == kFloat32 ? "float32" : "float64") + (pad ? " pad 3" : "") +
                                 (idt == kInt32 ? " int32 indices" : "");
        Tensor wc = leaf_on(w, Device::cpu()), wg = leaf_on(w, kGpu);
        Tensor ic = native::to(idx, idt);
        Tensor yc = nn::functional::embedding(ic, wc, pad);
        Tensor yg = nn::functional::embedding(native::to(ic, kGpu), wg, pad);
        expect_close(yg, yc, 0, what + ": forward");
        Tensor gy = seeded({3, 4, 6}, 2, dt);
        sum(mul(yc, gy)).backward();
        sum(mul(yg, to(gy, kGpu))).backward();
        // The sort-then-segment backward sums in index order, as the CPU kernel does.
        expect_close(wg.grad(), wc.grad(), dt == kFloat32 ? 1e-6 : 1e-14, what + ": weight gradient");
        Tensor first = native::clone(wg.grad());
        wg.mutable_grad() = Tensor();
        sum(mul(nn::functional::embedding(native::to(ic, kGpu), wg, pad), to(gy, kGpu))).backward();
        const auto a = first.to_vector<double>(), b = wg.grad().to_vector<double>();
        for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << what << ": run to run at " << i;
      }
    }
  }
}

TEST(CudaNnOps, EmbeddingIndexOutOfRangeIsAnIndexErrorNamingTheOp) {
  EMBER_REQUIRE_CUDA();
  Tensor w = to(randn({5, 3}), kGpu);
  for (int64_t bad : {5, -1}) {
    EXPECT_THAT(support::error_of<IndexError>(
                    [&] { nn::functional::embedding(to(from_vector<int64_t>({0, bad, 2}), kGpu), w); }),
                ::testing::HasSubstr("embedding: index out of range in self (index " + std::to_string(bad)))
        << "index " << bad;
  }
  // The context is still usable after the refused launch.
  expect_close(nn::functional::embedding(to(from_vector<int64_t>({4, 0}), kGpu), w),
               native::to(native::index_select(w, 0, to(from_vector<int64_t>({4, 0}), kGpu)), Device::cpu()), 0,
               "embedding after the error");
}

TEST(CudaNnOps, LayerNormForwardAndBackwardMatchCpu) {
  EMBER_REQUIRE_CUDA();
  for (DType dt : {kFloat32, kFloat64}) {
    for (bool affine : {true, false}) {
      const std::string what = std::string(dt == kFloat32 ? "float32" : "float64") + (affine ? " affine" : "");
      Tensor x = native::transpose(seeded({5, 70, 3}, 3, dt), 0, 1);  // [70, 5, 3], non-contiguous; 70 rows of 15
      Tensor w = seeded({5, 3}, 4, dt), b = seeded({5, 3}, 5, dt);
      Tensor xc = leaf_on(x, Device::cpu()), xg = leaf_on(x, kGpu);
      Tensor wc = affine ? leaf_on(w, Device::cpu()) : Tensor(), wg = affine ? leaf_on(w, kGpu) : Tensor();
      Tensor bc = affine ? leaf_on(b, Device::cpu()) : Tensor(), bg = affine ? leaf_on(b, kGpu) : Tensor();
      Tensor yc = nn::functional::layer_norm(xc, {5, 3}, wc, bc);
      Tensor yg = nn::functional::layer_norm(xg, {5, 3}, wg, bg);
      expect_close(yg, yc, tol_of(dt), what + ": forward");
      Tensor gy = seeded({70, 5, 3}, 6, dt);
      sum(mul(yc, gy)).backward();
      sum(mul(yg, to(gy, kGpu))).backward();
      expect_close(xg.grad(), xc.grad(), tol_of(dt), what + ": input gradient");
      if (affine) {
        expect_close(wg.grad(), wc.grad(), tol_of(dt), what + ": weight gradient");
        expect_close(bg.grad(), bc.grad(), tol_of(dt), what + ": bias gradient");
      }
    }
  }
}

TEST(CudaNnOps, PackAndPadMatchCpuWithLengthsOnEitherDevice) {
  EMBER_REQUIRE_CUDA();
  namespace R = nn::utils::rnn;
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = seeded({4, 7, 3}, 7, dt);  // [B, T, F]
    Tensor lengths = from_vector<int64_t>({5, 7, 2, 5});
    Tensor xc = leaf_on(x, Device::cpu()), xg = leaf_on(x, kGpu);
    PackedSequence pc = R::pack_padded_sequence(xc, lengths, /*batch_first=*/true, /*enforce_sorted=*/false);
    for (const Tensor& len : {lengths, to(lengths, kGpu)}) {
      PackedSequence pg = R::pack_padded_sequence(xg, len, true, false);
      expect_close(pg.data, pc.data, 0, "packed data, lengths on " + len.device().str());
      EXPECT_EQ(pg.batch_sizes.to_vector<int64_t>(), pc.batch_sizes.to_vector<int64_t>());
    }
    PackedSequence pg = R::pack_padded_sequence(xg, to(lengths, kGpu), true, false);
    auto [yc, lc] = R::pad_packed_sequence(pc, true, -2.0, 9);
    auto [yg, lg] = R::pad_packed_sequence(pg, true, -2.0, 9);
    expect_close(yg, yc, 0, "padded");
    EXPECT_EQ(lg.to_vector<int64_t>(), lc.to_vector<int64_t>());
    Tensor gy = seeded({4, 9, 3}, 8, dt);
    sum(mul(yc, gy)).backward();
    sum(mul(yg, to(gy, kGpu))).backward();
    expect_close(xg.grad(), xc.grad(), 0, "gradient through pack and pad");
  }
}

TEST(CudaNnOps, PackedSequenceMovedToTheGpuReadsItsHostMetadataByCopy) {
  EMBER_REQUIRE_CUDA();
  namespace R = nn::utils::rnn;
  Tensor x = seeded({6, 3, 2}, 9, kFloat32);  // [T, B, F]
  PackedSequence pc = R::pack_padded_sequence(x, std::vector<int64_t>{3, 6, 4}, false, false);
  PackedSequence moved = pc.to(kGpu);
  // A nested to() moves every member, batch_sizes and the permutations too.
  PackedSequence all_moved = NestedTensors<PackedSequence>::map(pc, [](const Tensor& t) {
    return t.defined() ? native::to(t, kGpu) : t;
  });
  ASSERT_EQ(all_moved.batch_sizes.device(), kGpu);
  auto [want, want_len] = R::pad_packed_sequence(pc);
  for (const PackedSequence* p : {&moved, &all_moved}) {
    auto [y, len] = R::pad_packed_sequence(*p);
    expect_close(y, want, 0, "pad_packed_sequence of a moved sequence");
    EXPECT_EQ(len.to_vector<int64_t>(), want_len.to_vector<int64_t>());
    nn::GRUImpl gru(2, 4);
    gru.to(kGpu);
    auto [out, h] = gru.forward(*p);
    EXPECT_EQ(out.data.device(), kGpu);
    EXPECT_EQ(h.sizes(), (IntList{1, 3, 4}));
  }
}

// Two modules built from the same seed, one moved to the GPU; forward, backward, compare.
template <class M, class Run>
void check_rnn_module(const std::string& what, DType dt, const std::function<std::shared_ptr<M>()>& make,
                      const Run& run) {
  manual_seed(21);
  auto mc = make();
  manual_seed(21);
  auto mg = make();
  mc->to(dt);
  mg->to(dt);
  mg->to(kGpu);
  Tensor x = seeded({6, 4, 5}, 10, dt);  // [T, B, F]
  Tensor xc = leaf_on(x, Device::cpu()), xg = leaf_on(x, kGpu);
  Tensor yc = run(*mc, xc), yg = run(*mg, xg);
  expect_close(yg, yc, tol_of(dt), what + ": output");
  Tensor gy = seeded(yc.sizes(), 11, dt);
  sum(mul(yc, gy)).backward();
  sum(mul(yg, to(gy, kGpu))).backward();
  expect_close(xg.grad(), xc.grad(), tol_of(dt), what + ": input gradient");
  const auto pc = mc->parameters(), pg = mg->parameters();
  ASSERT_EQ(pc.size(), pg.size());
  for (size_t i = 0; i < pc.size(); ++i) {
    expect_close(pg[i].grad(), pc[i].grad(), tol_of(dt), what + ": gradient of parameter " + std::to_string(i));
  }
}

TEST(CudaNnOps, RecurrentLayersMatchCpuPackedAndPaddedWithGradients) {
  EMBER_REQUIRE_CUDA();
  // The device-neutral layers (cuBLAS + cell kernels); the cuDNN path has cudnn_rnn_test.
  const bool cudnn_was = native::cudnn_enabled();
  native::set_cudnn_enabled(false);
  struct Restore {
    bool on;
    ~Restore() { native::set_cudnn_enabled(on); }
  } restore{cudnn_was};
  namespace R = nn::utils::rnn;
  const std::vector<int64_t> lengths = {4, 6, 1, 6};
  for (DType dt : {kFloat32, kFloat64}) {
    const std::string d = dt == kFloat32 ? " float32" : " float64";
    // Packed (unsorted lengths: permute_batch on the states), bidirectional, two layers;
    // output and final states both carry gradient.
    check_rnn_module<nn::LSTMImpl>(
        "LSTM packed" + d, dt,
        [] { return std::make_shared<nn::LSTMImpl>(nn::LSTMOptions(5, 3).num_layers(2).bidirectional(true)); },
        [&](nn::LSTMImpl& m, const Tensor& x) {
          auto [out, state] = m.forward(R::pack_padded_sequence(x, lengths, false, false));
          auto [y, len] = R::pad_packed_sequence(out, false, 0.0, 6);
          return cat({reshape(y, {-1}), reshape(std::get<0>(state), {-1}), reshape(std::get<1>(state), {-1})}, 0);
        });
    check_rnn_module<nn::GRUImpl>(
        "GRU packed" + d, dt,
        [] { return std::make_shared<nn::GRUImpl>(nn::GRUOptions(5, 3).num_layers(2).bidirectional(true)); },
        [&](nn::GRUImpl& m, const Tensor& x) {
          auto [out, h] = m.forward(R::pack_padded_sequence(x, lengths, false, false));
          auto [y, len] = R::pad_packed_sequence(out, false, 0.0, 6);
          return cat({reshape(y, {-1}), reshape(h, {-1})}, 0);
        });
    for (const char* act : {"tanh", "relu"}) {
      check_rnn_module<nn::RNNImpl>(
          std::string("RNN ") + act + " padded" + d, dt,
          [act] { return std::make_shared<nn::RNNImpl>(nn::RNNOptions(5, 3).num_layers(2).nonlinearity(act)); },
          [](nn::RNNImpl& m, const Tensor& x) {
            auto [y, h] = m.forward(x);
            return cat({reshape(y, {-1}), reshape(h, {-1})}, 0);
          });
    }
  }
}

}  // namespace
}  // namespace ember
