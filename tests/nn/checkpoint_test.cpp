// save_checkpoint / load_checkpoint: one safetensors file with "model.*" and "optim.*" tensors
// and JSON hyper-parameters in the metadata; training interrupted by save + load into fresh
// objects continues bit-exactly; extra metadata and RNG state; errors for a wrong optimizer type,
// a mismatched module and a non-checkpoint file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <stdexcept>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "autograd/ops.h"
#include "core/serialization.h"
#include "nn/activation.h"
#include "nn/checkpoint.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"
#include "tests/nn/checkpoint_device_util.h"
#include "tests/nn/nn_test_util.h"

namespace ember::nn {
namespace {

using testing::bit_equal;
using testing::error_of;

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ember_ckpt_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

std::shared_ptr<SequentialImpl> model() {
  return std::make_shared<SequentialImpl>(std::make_shared<EmbeddingImpl>(10, 6, 0), std::make_shared<LayerNormImpl>(IntList{6}),
                                      DropoutImpl(0.2), std::make_shared<LinearImpl>(6, 4));
}

Tensor batch_tokens(int k) {
  Generator g(1000 + static_cast<uint64_t>(k));
  return randint(0, 10, {8}, TensorOptions(kInt64), &g);
}
Tensor batch_targets(int k) {
  Generator g(2000 + static_cast<uint64_t>(k));
  return randint(0, 4, {8}, TensorOptions(kInt64), &g);
}

void train(SequentialImpl& net, optim::Optimizer& opt, int from, int to) {
  for (int k = from; k < to; ++k) {
    opt.zero_grad();
    Tensor loss = F::cross_entropy(net.forward(batch_tokens(k)), batch_targets(k), {.label_smoothing = 0.1});
    loss.backward();
    opt.step();
  }
}

TEST_F(Checkpoint, ResumedTrainingIsBitExact) {
  manual_seed(7);
  auto net = model();
  optim::Adam opt(net->parameters(), optim::AdamOptions(0.01).amsgrad(true));
  train(*net, opt, 0, 3);
  save_checkpoint(path("ckpt.safetensors"), *net, &opt, {{"epoch", "3"}});
  // The uninterrupted run continues here...
  train(*net, opt, 3, 6);

  // ... and the resumed one starts from fresh objects with other weights and hyper-parameters.
  manual_seed(99);
  auto fresh = model();
  optim::Adam fresh_opt(fresh->parameters(), optim::AdamOptions(0.5));
  std::map<std::string, std::string> extra;
  load_checkpoint(path("ckpt.safetensors"), *fresh, &fresh_opt, &extra, {.restore_rng_state = true});
  EXPECT_EQ(extra.at("epoch"), "3");
  EXPECT_EQ(fresh_opt.param_groups()[0].options().get_lr(), 0.01);
  train(*fresh, fresh_opt, 3, 6);

  auto a = net->state_dict(), b = fresh->state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bit_equal(a[i].second, b[i].second)) << a[i].first;
  auto sa = opt.state_dict(), sb = fresh_opt.state_dict();
  for (auto& [idx, st] : sa.state) {
    for (auto& [key, t] : st) EXPECT_TRUE(bit_equal(t, sb.state.at(idx).at(key))) << idx << "." << key;
  }
}

// map_location-like loading: a checkpoint goes where the model it is loaded into is (a GPU run's
// checkpoint resumes on CPU and the reverse; cuda_checkpoint_test covers cuda:0).
TEST_F(Checkpoint, LoadsOntoTheDeviceOfTheModelLoadedInto) {
  testing::expect_checkpoint_moves(Device::cpu(0), Device::cpu(1), path("a.safetensors"));
  testing::expect_checkpoint_moves(Device::cpu(1), Device::cpu(0), path("b.safetensors"));
}

TEST_F(Checkpoint, FileLayoutIsNamedTensorsPlusJsonMetadata) {
  auto net = model();
  optim::SGD opt({optim::ParamGroup({net->parameters()[0]}),
                  optim::ParamGroup({net->parameters()[1], net->parameters()[2]},
                                    std::make_unique<optim::SGDOptions>(optim::SGDOptions(0.3).momentum(0.9)))},
                 optim::SGDOptions(0.1).momentum(0.5));
  train(*net, opt, 0, 1);
  save_checkpoint(path("c.safetensors"), *net, &opt, {{"note", "hello"}});
  std::map<std::string, std::string> meta;
  auto tensors = load_safetensors_map(path("c.safetensors"), &meta);
  EXPECT_TRUE(tensors.count("model.0.weight"));
  EXPECT_TRUE(tensors.count("model.3.bias"));
  EXPECT_TRUE(tensors.count("optim.0.0.momentum_buffer"));
  EXPECT_TRUE(tensors.count("optim.1.2.momentum_buffer"));
  EXPECT_EQ(meta.at("format"), "ember.checkpoint.v1");
  EXPECT_EQ(meta.at("optim.type"), "SGD");
  EXPECT_EQ(meta.at("optim.1.params"), "[1,2]");
  const auto opts = nlohmann::json::parse(meta.at("optim.1.options"));
  EXPECT_EQ(opts.at("lr").get<double>(), 0.3);
  EXPECT_EQ(opts.at("momentum").get<double>(), 0.9);
  EXPECT_EQ(meta.at("extra.note"), "hello");
  EXPECT_TRUE(meta.count("rng.cpu"));
}

TEST_F(Checkpoint, ModuleOnlyRoundTrip) {
  auto net = model();
  save_checkpoint(path("m.safetensors"), *net);
  auto other = model();
  load_checkpoint(path("m.safetensors"), *other);
  auto a = net->state_dict(), b = other->state_dict();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bit_equal(a[i].second, b[i].second));
  optim::SGD opt(other->parameters(), optim::SGDOptions(0.1));
  EXPECT_NE(error_of([&] { load_checkpoint(path("m.safetensors"), *other, &opt); }).find("holds no optimizer state"),
            std::string::npos);
}

TEST_F(Checkpoint, MismatchesAreErrorsThatChangeNothing) {
  auto net = model();
  optim::Adam opt(net->parameters());
  train(*net, opt, 0, 1);
  save_checkpoint(path("x.safetensors"), *net, &opt);
  auto other = model();
  Tensor before = native::clone(other->parameters()[0]);
  optim::SGD sgd(other->parameters(), optim::SGDOptions(0.1));
  EXPECT_NE(error_of([&] { load_checkpoint(path("x.safetensors"), *other, &sgd); })
                .find("holds Adam state, the optimizer is SGD"),
            std::string::npos);
  optim::Adam partial({other->parameters()[0]});
  EXPECT_NE(error_of([&] { load_checkpoint(path("x.safetensors"), *other, &partial); }).find("optimizer group 0"),
            std::string::npos);
  EXPECT_TRUE(bit_equal(other->parameters()[0], before));
  SequentialImpl wrong(std::make_shared<LinearImpl>(6, 4));
  EXPECT_NE(error_of([&] { load_checkpoint(path("x.safetensors"), wrong); }).find("Unexpected key(s) in state_dict"),
            std::string::npos);
  save_safetensors(path("plain.safetensors"), {{"w", zeros({1})}});
  EXPECT_NE(error_of([&] { load_checkpoint(path("plain.safetensors"), *other); }).find("is not an ember checkpoint"),
            std::string::npos);
}

// ---- Issue 19, item 5: a load that fails changes nothing ------------------------------------

// A checkpoint of a trained model + Adam, rewritten by `edit` (tensors by name, metadata).
using Tensors = std::vector<std::pair<std::string, Tensor>>;
using Meta = std::map<std::string, std::string>;

// A model trained two steps with Adam (seed 3) and saved at `file`, and what that checkpoint holds.
struct SavedCheckpoint {
  std::shared_ptr<SequentialImpl> model;
  Tensors tensors;
  Meta meta;
};
SavedCheckpoint save_trained(const std::string& file) {
  manual_seed(3);
  SavedCheckpoint c{model(), {}, {}};
  optim::Adam opt(c.model->parameters(), optim::AdamOptions(0.01));
  train(*c.model, opt, 0, 2);
  save_checkpoint(file, *c.model, &opt);
  c.tensors = load_safetensors(file, &c.meta);
  return c;
}

struct Snapshot {
  StateDict module;
  std::vector<std::pair<std::string, Tensor>> optim;
  std::string options;
  std::vector<uint8_t> rng;
};

Snapshot snapshot(const Module& m, const optim::Optimizer& opt) {
  Snapshot s;
  for (const auto& [k, t] : m.state_dict()) s.module.emplace_back(k, native::clone(t));
  auto sd = opt.state_dict();
  for (const auto& [idx, st] : sd.state)
    for (const auto& [key, t] : st) s.optim.emplace_back(std::to_string(idx) + "." + key, native::clone(t));
  for (const auto& g : sd.param_groups) s.options += g.options;
  s.rng = default_generator(Device::cpu()).get_state();
  return s;
}

void expect_unchanged(const Snapshot& before, const Module& m, const optim::Optimizer& opt, const std::string& what) {
  Snapshot now = snapshot(m, opt);
  ASSERT_EQ(now.module.size(), before.module.size()) << what;
  for (size_t i = 0; i < now.module.size(); ++i)
    EXPECT_TRUE(bit_equal(now.module[i].second, before.module[i].second)) << what << ": " << now.module[i].first;
  ASSERT_EQ(now.optim.size(), before.optim.size()) << what;
  for (size_t i = 0; i < now.optim.size(); ++i)
    EXPECT_TRUE(bit_equal(now.optim[i].second, before.optim[i].second)) << what << ": " << now.optim[i].first;
  EXPECT_EQ(now.options, before.options) << what;
  EXPECT_EQ(now.rng, before.rng) << what;
}

struct BadCheckpoint {
  const char* name;
  std::function<void(Tensors&, Meta&)> edit;
  const char* expected;  // the key (or words) the error must name
};

Tensor& tensor_named(Tensors& t, const std::string& name) {
  for (auto& [k, v] : t)
    if (k == name) return v;
  throw std::runtime_error("test: no tensor " + name);
}

void erase_tensor(Tensors& t, const std::string& name) {
  std::erase_if(t, [&](const auto& p) { return p.first == name; });
}

std::vector<BadCheckpoint> bad_checkpoints() {
  std::vector<BadCheckpoint> c;
  // The first two parameters: 0 is the embedding weight [10, 6], 1 the LayerNorm weight [6].
  c.push_back({"OptimizerStateOfTheWrongShape",
               [](Tensors& t, Meta&) { tensor_named(t, "optim.0.0.exp_avg") = zeros({3, 6}); }, "exp_avg"});
  c.push_back({"IndexListHugeAndNaN", [](Tensors&, Meta& m) { m["optim.0.params"] = "[1e300,1,2,3,NaN]"; },
               "optim.0.params"});
  c.push_back({"IndexListOfFloats", [](Tensors&, Meta& m) { m["optim.0.params"] = "[1e300,1,2,3,4]"; },
               "optim.0.params"});
  c.push_back({"IndexListDuplicate", [](Tensors&, Meta& m) { m["optim.0.params"] = "[0,0,2,3,4]"; },
               "more than once"});
  c.push_back({"RngNotHex", [](Tensors&, Meta& m) { m["rng.cpu"] = "zz"; }, "rng.cpu"});
  c.push_back({"RngWrongLength", [](Tensors&, Meta& m) { m["rng.cpu"] = "00ff"; }, "rng.cpu"});
  c.push_back({"NumGroupsNotANumber", [](Tensors&, Meta& m) { m["optim.num_groups"] = "abc"; }, "optim.num_groups"});
  c.push_back({"NumGroupsOutOfRange", [](Tensors&, Meta& m) { m["optim.num_groups"] = "99999999999999999999"; },
               "optim.num_groups"});
  c.push_back({"NumGroupsWrong", [](Tensors&, Meta& m) { m["optim.num_groups"] = "2"; }, "optim.num_groups"});
  c.push_back({"StateIndexNotANumber",
               [](Tensors& t, Meta&) { t.emplace_back("optim.0.x.step", zeros({})); }, "optim.0.x.step"});
  c.push_back({"StateWithoutExpAvg", [](Tensors& t, Meta&) { erase_tensor(t, "optim.0.1.exp_avg"); }, "exp_avg"});
  c.push_back({"ZeroDimExpAvg", [](Tensors& t, Meta&) { tensor_named(t, "optim.0.1.exp_avg") = zeros({}); },
               "exp_avg"});
  c.push_back({"StepShapedLikeTheParameter",
               [](Tensors& t, Meta&) { tensor_named(t, "optim.0.1.step") = ones({6}); }, "step"});
  c.push_back({"StepNotFinite",
               [](Tensors& t, Meta&) { tensor_named(t, "optim.0.1.step") = full({}, std::nan("")); }, "step"});
  c.push_back({"UnknownStateKey", [](Tensors& t, Meta&) { t.emplace_back("optim.0.1.momentum", zeros({6})); },
               "momentum"});
  c.push_back({"BadGroupOptions", [](Tensors&, Meta& m) {
                 m["optim.0.options"] = std::regex_replace(m["optim.0.options"], std::regex("\"lr\":[^,}]*"), "\"lr\":-1");
               },
               "learning rate"});
  c.push_back({"ModuleTensorOfTheWrongShape",
               [](Tensors& t, Meta&) { tensor_named(t, "model.3.bias") = zeros({5}); }, "size mismatch for 3.bias"});
  return c;
}

class CheckpointAllOrNothing : public Checkpoint, public ::testing::WithParamInterface<BadCheckpoint> {};

TEST_P(CheckpointAllOrNothing, FailedLoadChangesNothing) {
  const BadCheckpoint& bad = GetParam();
  SavedCheckpoint good = save_trained(path("good.safetensors"));
  bad.edit(good.tensors, good.meta);
  save_safetensors(path("bad.safetensors"), good.tensors, good.meta);

  // The target has trained state of its own (other values), which must survive the failure.
  manual_seed(4);
  auto net = model();
  optim::Adam opt(net->parameters(), optim::AdamOptions(0.02));
  train(*net, opt, 5, 7);
  manual_seed(11);
  Snapshot before = snapshot(*net, opt);
  EXPECT_THAT(error_of<ValueError>([&] {
                load_checkpoint(path("bad.safetensors"), *net, &opt, nullptr, {.restore_rng_state = true});
              }),
              ::testing::HasSubstr(bad.expected))
      << bad.name;
  expect_unchanged(before, *net, opt, bad.name);
  train(*net, opt, 7, 8);  // and the optimizer still steps
}

INSTANTIATE_TEST_SUITE_P(Cases, CheckpointAllOrNothing, ::testing::ValuesIn(bad_checkpoints()),
                         [](const ::testing::TestParamInfo<BadCheckpoint>& info) { return std::string(info.param.name); });

TEST_F(Checkpoint, CraftedGoodCheckpointStillLoads) {
  // The crafting path itself (load, rewrite, save) keeps a valid checkpoint valid.
  SavedCheckpoint good = save_trained(path("good.safetensors"));
  save_safetensors(path("copy.safetensors"), good.tensors, good.meta);
  auto net = model();
  optim::Adam opt(net->parameters());
  load_checkpoint(path("copy.safetensors"), *net, &opt, nullptr, {.restore_rng_state = true});
  auto a = good.model->state_dict(), b = net->state_dict();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bit_equal(a[i].second, b[i].second)) << a[i].first;
}

}  // namespace
}  // namespace ember::nn
