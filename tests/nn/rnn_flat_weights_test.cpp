// The RNN modules' flat weight buffer (Note [RNN flat weights] in core/ops/rnn_flat_weights.cpp)
// on CPU: every parameter a consecutive view of one buffer under PyTorch's names, kept through
// reset_parameters, state_dict/load_state_dict (and a safetensors round trip), clone, to(dtype),
// to(device) and optimizer steps; a replaced parameter breaks flatness and flatten_parameters()
// restores it; the weight-space helpers the cuDNN path uses (pack into a given layout, gradients
// back per parameter) round-trip for ember's own layout and for a permuted one.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <unistd.h>
#include <unordered_map>
#include <vector>

#include "autograd/ops.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "core/ops/rnn_flat_weights.h"
#include "core/serialization.h"
#include "nn/optim/sgd.h"
#include "nn/rnn.h"

namespace ember::nn {
namespace {

std::vector<Tensor> params_of(const Module& m) {
  std::vector<Tensor> out;
  for (const auto& [n, p] : m.named_parameters()) out.push_back(p);
  return out;
}

std::vector<std::string> names_of(const Module& m) {
  std::vector<std::string> out;
  for (const auto& [n, p] : m.named_parameters()) out.push_back(n);
  return out;
}

// The flat buffer as one tensor: a 1-D view over the storage of the first parameter.
std::vector<float> flat_values(const Module& m) {
  std::vector<float> out;
  for (const Tensor& p : params_of(m)) {
    auto v = native::to(p, kFloat32).to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

TEST(RnnFlatWeights, ParametersAreConsecutiveViewsOfOneBufferUnderPyTorchNames) {
  LSTMImpl lstm(LSTMOptions(3, 4).num_layers(2).bidirectional(true));
  const std::vector<std::string> want{
      "weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0",         "bias_hh_l0",
      "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
      "weight_ih_l1",         "weight_hh_l1",         "bias_ih_l1",         "bias_hh_l1",
      "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"};
  EXPECT_EQ(names_of(lstm), want);
  const auto ps = params_of(lstm);
  ASSERT_TRUE(native::rnn_weights_are_flat(ps));
  int64_t total = 0;
  for (const Tensor& p : ps) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_TRUE(p.is_leaf());
    total += p.numel();
  }
  EXPECT_EQ(ps[0].storage().num_bytes(), static_cast<size_t>(total) * sizeof(float));
  EXPECT_EQ(ps[1].storage_offset(), ps[0].storage_offset() + 16 * 3);
  // Without bias there are only the matrices, still one buffer.
  GRUImpl gru(GRUOptions(2, 3).bias(false).num_layers(2));
  EXPECT_EQ(names_of(gru), (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "weight_ih_l1", "weight_hh_l1"}));
  EXPECT_TRUE(native::rnn_weights_are_flat(params_of(gru)));
}

TEST(RnnFlatWeights, WritesThroughOneParameterLandInTheBufferAndOthersAreUntouched) {
  RNNImpl rnn(RNNOptions(2, 3).num_layers(2));
  auto ps = params_of(rnn);
  const std::vector<float> before = flat_values(rnn);
  {
    NoGradGuard g;
    native::fill_(ps[2], 7.0);  // bias_ih_l0
  }
  const float* base = static_cast<const float*>(ps[0].storage().data());
  const int64_t start = ps[2].storage_offset();
  for (int64_t i = 0; i < ps[2].numel(); ++i) EXPECT_EQ(base[start + i], 7.0f);
  const std::vector<float> after = flat_values(rnn);
  for (size_t i = 0; i < after.size(); ++i) {
    const bool in_bias = static_cast<int64_t>(i) >= start && static_cast<int64_t>(i) < start + ps[2].numel();
    if (!in_bias) {
      EXPECT_EQ(after[i], before[i]) << i;
    }
  }
}

TEST(RnnFlatWeights, StateDictRoundTripKeepsTheBufferAndValues) {
  LSTMImpl a(LSTMOptions(3, 4).num_layers(2));
  LSTMImpl b(LSTMOptions(3, 4).num_layers(2));
  const void* b_buffer = params_of(b)[0].storage().data();
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(flat_values(a), flat_values(b));
  EXPECT_TRUE(native::rnn_weights_are_flat(params_of(b)));
  EXPECT_EQ(params_of(b)[0].storage().data(), b_buffer);  // loaded in place
  // Through a safetensors file as well.
  const std::string path = "/tmp/ember_rnn_flat_" + std::to_string(::getpid()) + ".safetensors";
  save_safetensors(path, a.state_dict());
  LSTMImpl c(LSTMOptions(3, 4).num_layers(2));
  StateDict loaded;
  for (auto& [n, t] : load_safetensors(path)) loaded.emplace_back(n, t);
  std::remove(path.c_str());
  c.load_state_dict(loaded);
  EXPECT_EQ(flat_values(a), flat_values(c));
  EXPECT_TRUE(native::rnn_weights_are_flat(params_of(c)));
}

TEST(RnnFlatWeights, CloneHasItsOwnFlatBufferWithTheSameValues) {
  GRUImpl gru(GRUOptions(3, 2).num_layers(2).bidirectional(true));
  auto copy = gru.clone_as();
  EXPECT_EQ(names_of(*copy), names_of(gru));
  EXPECT_EQ(flat_values(*copy), flat_values(gru));
  const auto mine = params_of(gru);
  auto theirs = params_of(*copy);
  EXPECT_TRUE(native::rnn_weights_are_flat(theirs));
  EXPECT_FALSE(theirs[0].storage().is_same(mine[0].storage()));
  {
    NoGradGuard g;
    native::fill_(theirs[0], 1.0);
  }
  EXPECT_NE(flat_values(*copy), flat_values(gru));
}

// A user's model holding an LSTM, as DataParallel replicates it: the clone's LSTM is flat too.
struct Holder : Cloneable<Holder> {
  std::shared_ptr<LSTMImpl> lstm;
  Holder() { reset(); }
  void reset() override { lstm = register_module("lstm", std::make_shared<LSTMImpl>(LSTMOptions(2, 3).num_layers(2))); }
};

TEST(RnnFlatWeights, AChildOfAClonedModuleIsFlatToo) {
  Holder h;
  auto copy = h.clone_as();
  EXPECT_EQ(flat_values(*copy->lstm), flat_values(*h.lstm));
  EXPECT_TRUE(native::rnn_weights_are_flat(params_of(*copy->lstm)));
  EXPECT_FALSE(params_of(*copy->lstm)[0].storage().is_same(params_of(*h.lstm)[0].storage()));
  // Parameters a clone is given (DataParallel's CPU aliases, its broadcast copies) are taken
  // as they are: no re-flattening copy there.
  std::unordered_map<const TensorImpl*, Tensor> given;
  for (const Tensor& p : params_of(*h.lstm)) given.emplace(p.impl(), native::to(p, Device::cpu(1)));
  const detail::CloneParameterSource source = [&](const Tensor& original, Device) {
    auto it = given.find(original.impl());
    return it == given.end() ? Tensor() : it->second;
  };
  detail::CloneParameterSourceGuard guard(&source);
  auto alias = h.clone_as(Device::cpu(1));
  const auto mine = params_of(*h.lstm), theirs = params_of(*alias->lstm);
  for (size_t i = 0; i < mine.size(); ++i) EXPECT_EQ(theirs[i].raw_data(), given.at(mine[i].impl()).raw_data()) << i;
}

TEST(RnnFlatWeights, ToDtypeAndToDeviceReflattenInPlaceOfTheSameHandles) {
  LSTMImpl lstm(LSTMOptions(2, 3).num_layers(2));
  const std::vector<Tensor> handles = params_of(lstm);  // what an optimizer would hold
  const std::vector<float> values = flat_values(lstm);
  lstm.to(kFloat64);
  for (const Tensor& h : handles) EXPECT_EQ(h.dtype(), kFloat64);
  EXPECT_TRUE(native::rnn_weights_are_flat(handles));
  lstm.to(Device::cpu(1));
  for (const Tensor& h : handles) EXPECT_EQ(h.device(), Device::cpu(1));
  EXPECT_TRUE(native::rnn_weights_are_flat(handles));
  EXPECT_EQ(flat_values(lstm), values);  // float32 -> float64 -> float32 is exact
  // The module still runs on its new device and dtype.
  Tensor x = native::to(native::to(randn({4, 2, 2}), kFloat64), Device::cpu(1));
  auto [y, st] = lstm.forward(x);
  EXPECT_EQ(y.device(), Device::cpu(1));
  EXPECT_EQ(y.dtype(), kFloat64);
}

TEST(RnnFlatWeights, OptimizerStepUpdatesTheFlatBuffer) {
  manual_seed(3);
  LSTMImpl lstm(LSTMOptions(2, 3).num_layers(2).bidirectional(true));
  optim::SGD opt(lstm.parameters(), optim::SGDOptions(0.5));
  const std::vector<float> before = flat_values(lstm);
  auto [y, st] = lstm.forward(randn({5, 2, 2}));
  sum(y).backward();
  std::vector<float> want = before;
  size_t i = 0;
  for (const Tensor& p : params_of(lstm)) {
    for (float g : p.grad().to_vector<float>()) want[i++] -= 0.5f * g;
  }
  opt.step();
  const auto ps = params_of(lstm);
  EXPECT_TRUE(native::rnn_weights_are_flat(ps));
  const float* base = static_cast<const float*>(ps[0].storage().data()) + ps[0].storage_offset();
  for (size_t k = 0; k < want.size(); ++k) EXPECT_FLOAT_EQ(base[k], want[k]) << k;
}

TEST(RnnFlatWeights, AReplacedParameterBreaksFlatnessAndFlattenParametersRestoresIt) {
  LSTMImpl lstm(LSTMOptions(2, 3));
  Tensor x = randn({4, 1, 2});
  auto [y_before, s0] = lstm.forward(x);
  {
    NoGradGuard g;
    Tensor* slot = lstm.find_parameter("weight_hh_l0");
    ASSERT_NE(slot, nullptr);
    Module::set_data(*slot, native::clone(*slot));  // same values, its own storage
  }
  EXPECT_FALSE(native::rnn_weights_are_flat(params_of(lstm)));
  auto [y_split, s1] = lstm.forward(x);  // results do not depend on the layout
  EXPECT_EQ(y_split.to_vector<float>(), y_before.to_vector<float>());
  lstm.flatten_parameters();
  EXPECT_TRUE(native::rnn_weights_are_flat(params_of(lstm)));
  auto [y_after, s2] = lstm.forward(x);
  EXPECT_EQ(y_after.to_vector<float>(), y_before.to_vector<float>());
}

TEST(RnnFlatWeights, GateOffsetsOfTheConcatenation) {
  // w_ih [2H, F], w_hh [2H, H], b [2H] with 2 gates, H = 2, F = 3.
  std::vector<Tensor> w{zeros({4, 3}), zeros({4, 2}), zeros({4})};
  EXPECT_EQ(native::rnn_gate_offsets(w, 2), (std::vector<int64_t>{0, 6, 12, 16, 20, 22}));
}

TEST(RnnFlatWeights, PackAndUnpackRoundTripInTheConcatenatedLayout) {
  LSTMImpl lstm(LSTMOptions(3, 2).num_layers(2));
  const auto ps = params_of(lstm);
  const auto offs = native::rnn_gate_offsets(ps, 4);
  int64_t total = 0;
  for (const Tensor& p : ps) total += p.numel();
  Tensor flat = native::rnn_pack_weights(ps, 4, offs, total);
  EXPECT_EQ(flat.to_vector<float>(), flat_values(lstm));
  const auto back = native::rnn_unpack_weights(flat, ps, 4, offs);
  ASSERT_EQ(back.size(), ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(back[i].sizes(), ps[i].sizes());
    EXPECT_TRUE(back[i].storage().is_same(flat.storage())) << "concatenated layout: views, no copy";
    EXPECT_EQ(back[i].to_vector<float>(), ps[i].to_vector<float>());
  }
}

TEST(RnnFlatWeights, PackAndUnpackFollowAForeignLayout) {
  // A layout unlike ember's: gate blocks in reverse order, with a gap, in a larger space.
  GRUImpl gru(GRUOptions(2, 2));
  const auto ps = params_of(gru);  // w_ih [6, 2], w_hh [6, 2], b_ih [6], b_hh [6]
  const int64_t G = 3;
  std::vector<int64_t> offs;
  int64_t next = 100;
  for (size_t i = ps.size(); i-- > 0;) {
    const int64_t block = ps[i].numel() / G;
    std::vector<int64_t> mine(static_cast<size_t>(G));
    for (int64_t g = G; g-- > 0;) {
      mine[static_cast<size_t>(g)] = next;
      next += block + 1;
    }
    offs.insert(offs.begin(), mine.begin(), mine.end());
  }
  Tensor flat = native::rnn_pack_weights(ps, G, offs, next);
  const auto v = flat.to_vector<float>();
  for (size_t i = 0; i < ps.size(); ++i) {
    const auto p = ps[i].to_vector<float>();
    const size_t block = p.size() / G;
    for (int64_t g = 0; g < G; ++g) {
      for (size_t k = 0; k < block; ++k) {
        EXPECT_EQ(v[static_cast<size_t>(offs[i * G + static_cast<size_t>(g)]) + k], p[static_cast<size_t>(g) * block + k]);
      }
    }
  }
  EXPECT_EQ(v[0], 0.0f);  // outside the blocks: zeros
  const auto back = native::rnn_unpack_weights(flat, ps, G, offs);
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(back[i].to_vector<float>(), ps[i].to_vector<float>());
  // The last block ends one before `next`: one element less no longer holds it.
  EXPECT_THROW(native::rnn_pack_weights(ps, G, offs, next - 2), ValueError);
}

}  // namespace
}  // namespace ember::nn
