// Parity with PyTorch (ctest label "parity"): the same float32 inputs and weights go through
// ember and, via tests/nn/parity/nn_parity.py, through Debian's python3-torch (/usr/bin/python3);
// outputs, gradients and optimizer states must agree to 1e-5 relative. Inputs travel in one
// safetensors file (case list as JSON metadata), results come back in another. Skips, saying
// why, when /usr/bin/python3 cannot import torch.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "autograd/ops.h"
#include <nlohmann/json.hpp>

#include "core/serialization.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/optim/adam.h"
#include "nn/optim/adamw.h"
#include "nn/optim/sgd.h"
#include "tests/nn/nn_test_util.h"

namespace ember::nn {
namespace {

using F::Reduction;
using testing::leaf;
using testing::randn_seeded;

constexpr const char* kPython = "/usr/bin/python3";

std::string script_path() {
  const char* src = std::getenv("EMBER_SOURCE_DIR");
  std::filesystem::path base = src ? std::filesystem::path(src) / "tests/nn"
                                   : std::filesystem::path(__FILE__).parent_path();
  return (base / "parity" / "nn_parity.py").string();
}

std::string torch_unavailable_reason() {
  if (!std::filesystem::exists(kPython)) return std::string(kPython) + " does not exist";
  std::string cmd = std::string(kPython) + " -c 'import torch' >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) return std::string(kPython) + " cannot import torch (install python3-torch)";
  if (!std::filesystem::exists(script_path())) return "parity script not found at " + script_path();
  return "";
}

struct Case {
  std::string name;
  std::string json;  // {"name":..,"kind":..,...}
  std::vector<std::pair<std::string, Tensor>> inputs;
  std::vector<std::pair<std::string, Tensor>> ours;
};

class Parity : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = torch_unavailable_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    dir_ = std::filesystem::temp_directory_path() / ("ember_parity_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  Case& add(const std::string& name, const std::string& kind, nlohmann::json options = nlohmann::json::object()) {
    options["name"] = name;
    options["kind"] = kind;
    cases_.push_back({name, options.dump(), {}, {}});
    return cases_.back();
  }

  // Runs PyTorch on every case and compares every output of ours with its counterpart.
  void run_and_compare() {
    std::vector<std::pair<std::string, Tensor>> inputs;
    std::string list = "[";
    for (size_t i = 0; i < cases_.size(); ++i) {
      list += (i ? "," : "");
      list += cases_[i].json;
      for (auto& [k, t] : cases_[i].inputs) inputs.emplace_back(cases_[i].name + "." + k, t);
    }
    list += "]";
    const std::string in = (dir_ / "in.safetensors").string(), out = (dir_ / "out.safetensors").string();
    const std::string err = (dir_ / "stderr.txt").string();
    save_safetensors(in, inputs, {{"cases", list}});
    std::string cmd = std::string("OMP_NUM_THREADS=1 ") + kPython + " " + script_path() + " " + in + " " + out +
                      " 2>" + err;
    int rc = std::system(cmd.c_str());
    if (rc != 0) {
      std::ifstream f(err);
      std::stringstream ss;
      ss << f.rdbuf();
      FAIL() << "PyTorch side failed (" << rc << "):\n" << ss.str();
    }
    auto theirs = load_safetensors_map(out);
    for (auto& c : cases_) {
      for (auto& [k, mine] : c.ours) {
        const std::string key = c.name + "." + k;
        auto it = theirs.find(key);
        ASSERT_NE(it, theirs.end()) << "PyTorch produced no " << key;
        compare(key, mine, it->second);
      }
    }
  }

  static void compare(const std::string& key, const Tensor& mine, const Tensor& ref) {
    ASSERT_EQ(mine.sizes(), ref.sizes()) << key;
    auto a = mine.to_vector<double>(), b = ref.to_vector<double>();
    double scale = 1.0;
    for (double v : b) scale = std::max(scale, std::abs(v));
    double worst = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
      const double d = std::abs(a[i] - b[i]);
      // 1e-5 relative per element; elements near zero are held to 1e-7 of the tensor's scale.
      EXPECT_LE(d, 1e-5 * std::abs(b[i]) + 1e-7 * scale) << key << "[" << i << "]: ember " << a[i] << " torch " << b[i];
      worst = std::max(worst, d / (std::abs(b[i]) + 1e-7 * scale / 1e-5));
    }
    std::cout << "[parity] " << key << " max rel err " << worst << "\n";
  }

  std::filesystem::path dir_;
  std::vector<Case> cases_;
};

Tensor f32(const IntList& s, uint64_t seed) { return randn_seeded(s, seed, kFloat32); }
Tensor i64(std::vector<int64_t> v, IntList s) { return from_vector(v, s); }

// y and the gradients of sum(y * up) with respect to `grads`.
void record_backward(Case& c, const Tensor& y, const Tensor& up, const std::vector<std::pair<std::string, Tensor>>& grads,
                     const std::string& out_name = "y") {
  c.inputs.emplace_back("up", up);
  c.ours.emplace_back(out_name, y);
  sum(mul(y, up)).backward();
  for (auto& [n, t] : grads) c.ours.emplace_back(n, t.grad());
}

TEST_F(Parity, LayersLossesAndOptimizersAgreeWithPyTorch) {
  {  // Linear through the module
    LinearImpl lin(5, 3);
    Tensor x = leaf(f32({4, 2, 5}, 1));
    Case& c = add("linear", "linear");
    c.inputs = {{"x", x}, {"w", lin.weight}, {"b", lin.bias}};
    record_backward(c, lin.forward(x), f32({4, 2, 3}, 2), {{"grad_x", x}, {"grad_w", lin.weight}, {"grad_b", lin.bias}});
  }
  {  // Embedding with padding_idx, repeated indices
    EmbeddingImpl emb(10, 6, 0);
    Tensor idx = i64({0, 3, 3, 9, 0, 1, 2, 3, 5, 5, 0, 7}, {3, 4});
    Case& c = add("embedding", "embedding", {{"padding_idx", 0}});
    c.inputs = {{"w", emb.weight}, {"idx", idx}};
    Tensor y = emb.forward(idx);
    record_backward(c, y, f32({3, 4, 6}, 3), {{"grad_w", emb.weight}});
    c.ours.emplace_back("y_module", y);
  }
  struct CE {
    std::string name;
    IntList sizes;
    std::vector<int64_t> target;
    IntList target_sizes;
    bool weight;
    int64_t ignore_index;
    double ls;
    Reduction r;
  };
  const std::vector<CE> ce_cases = {
      {"ce_weight_ignore_ls_mean", {6, 5}, {0, 2, 4, 2, 1, 3}, {6}, true, 2, 0.1, Reduction::Mean},
      {"ce_weight_none", {6, 5}, {0, 2, 4, -100, 1, 3}, {6}, true, -100, 0.0, Reduction::None},
      {"ce_ls_sum", {6, 5}, {4, 4, 0, 1, -100, 3}, {6}, false, -100, 0.2, Reduction::Sum},
      {"ce_ls_ignore_mean", {6, 5}, {4, 4, 0, 1, -100, 3}, {6}, false, -100, 0.2, Reduction::Mean},
      {"ce_spatial_weight_ignore", {2, 5, 3}, {1, 4, 0, 2, 2, 3}, {2, 3}, true, 2, 0.05, Reduction::Mean},
  };
  uint64_t seed = 10;
  for (const auto& e : ce_cases) {
    Tensor x = leaf(f32(e.sizes, ++seed));
    Tensor t = i64(e.target, e.target_sizes);
    Tensor w = e.weight ? native::add(native::abs(f32({5}, ++seed)), 0.1) : Tensor();
    Case& c = add(e.name, "cross_entropy", {{"ignore_index", e.ignore_index},
                                                {"label_smoothing", e.ls},
                                                {"reduction", F::reduction_name(e.r)}});
    c.inputs = {{"x", x}, {"target", t}};
    if (w.defined()) c.inputs.emplace_back("weight", w);
    Tensor loss = F::cross_entropy(x, t, {.weight = w, .ignore_index = e.ignore_index, .reduction = e.r,
                                          .label_smoothing = e.ls});
    record_backward(c, loss, f32(loss.sizes(), ++seed), {{"grad_x", x}}, "loss");
  }
  for (Reduction r : {Reduction::Mean, Reduction::None}) {
    Tensor x = leaf(native::log_softmax(f32({5, 4}, ++seed), 1));
    Tensor t = i64({3, 0, 1, 1, 2}, {5});
    Tensor w = native::add(native::abs(f32({4}, ++seed)), 0.1);
    std::string name = std::string("nll_") + F::reduction_name(r);
    Case& c = add(name, "nll_loss", {{"ignore_index", 1}, {"reduction", F::reduction_name(r)}});
    c.inputs = {{"x", x}, {"target", t}, {"weight", w}};
    Tensor loss = F::nll_loss(x, t, {.weight = w, .ignore_index = 1, .reduction = r});
    record_backward(c, loss, f32(loss.sizes(), ++seed), {{"grad_x", x}}, "loss");
  }
  for (Reduction r : {Reduction::Mean, Reduction::Sum}) {
    Tensor x = leaf(f32({3, 4}, ++seed)), t = leaf(f32({3, 4}, ++seed));
    std::string name = std::string("mse_") + F::reduction_name(r);
    Case& c = add(name, "mse_loss", {{"reduction", F::reduction_name(r)}});
    c.inputs = {{"x", x}, {"target", t}};
    Tensor loss = F::mse_loss(x, t, r);
    record_backward(c, loss, f32({}, ++seed), {{"grad_x", x}, {"grad_target", t}}, "loss");
  }
  {
    Tensor x = leaf(native::mul(f32({4, 3}, ++seed), 4.0));
    Tensor t = native::to(native::gt(f32({4, 3}, ++seed), 0.0), kFloat32);
    Tensor w = native::abs(f32({4, 3}, ++seed)), pw = from_vector(std::vector<float>{0.5f, 2.0f, 3.0f}, {3});
    Case& c = add("bce_with_logits", "bce_with_logits");
    c.inputs = {{"x", x}, {"target", t}, {"weight", w}, {"pos_weight", pw}};
    Tensor loss = F::binary_cross_entropy_with_logits(x, t, {.weight = w, .pos_weight = pw});
    record_backward(c, loss, f32({}, ++seed), {{"grad_x", x}}, "loss");
  }
  {
    Tensor x = leaf(f32({3, 2, 6}, ++seed)), w = leaf(f32({6}, ++seed)), b = leaf(f32({6}, ++seed));
    Case& c = add("layer_norm", "layer_norm",
                  {{"normalized_shape", {6}}, {"eps", 1e-5}});
    c.inputs = {{"x", x}, {"w", w}, {"b", b}};
    record_backward(c, F::layer_norm(x, {6}, w, b, 1e-5), f32({3, 2, 6}, ++seed),
                    {{"grad_x", x}, {"grad_w", w}, {"grad_b", b}});
  }
  auto add_optimizer = [&](const std::string& name, optim::Optimizer& opt, Tensor& p, const Tensor& p0, int steps,
                           const std::string& options_json, std::vector<std::string> state_keys) {
    Case& c = add(name, "optimizer",
                  {{"optimizer", opt.type_name()},
                   {"steps", steps},
                   {"options", nlohmann::json::parse(options_json)}});
    c.inputs.emplace_back("p", p0);
    for (int k = 0; k < steps; ++k) {
      Tensor g = f32(p.sizes(), 300 + static_cast<uint64_t>(k));
      c.inputs.emplace_back("grad" + std::to_string(k), g);
      p.set_grad(native::clone(g));
      opt.step();
    }
    c.ours.emplace_back("p", p);
    for (auto& k : state_keys) c.ours.emplace_back(k, opt.find_state(p)->at(k));
  };
  {
    Tensor p0 = f32({5, 3}, 200), p = leaf(p0);
    optim::SGD opt({p}, optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01));
    add_optimizer("sgd_nesterov", opt, p, p0, 3, opt.param_groups()[0].options().to_json(), {"momentum_buffer"});
  }
  {
    Tensor p0 = f32({5, 3}, 201), p = leaf(p0);
    optim::Adam opt({p}, optim::AdamOptions(0.01).weight_decay(0.01));
    add_optimizer("adam_one_step", opt, p, p0, 1, opt.param_groups()[0].options().to_json(),
                  {"exp_avg", "exp_avg_sq"});
  }
  {
    Tensor p0 = f32({5, 3}, 202), p = leaf(p0);
    optim::Adam opt({p}, optim::AdamOptions(0.01).betas({0.8, 0.99}).amsgrad(true));
    add_optimizer("adam_amsgrad", opt, p, p0, 3, opt.param_groups()[0].options().to_json(),
                  {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"});
  }
  {
    Tensor p0 = f32({5, 3}, 203), p = leaf(p0);
    optim::AdamW opt({p}, optim::AdamWOptions(0.01).weight_decay(0.1));
    add_optimizer("adamw", opt, p, p0, 3, opt.param_groups()[0].options().to_json(), {"exp_avg", "exp_avg_sq"});
  }
  run_and_compare();
}

}  // namespace
}  // namespace ember::nn
