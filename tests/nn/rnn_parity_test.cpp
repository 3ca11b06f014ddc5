// Parity with PyTorch (ctest label `parity`): the same weights, inputs, initial states and
// upstream gradients go through ember and through torch (tests/nn/parity/rnn_parity.py under
// Debian's /usr/bin/python3, or $EMBER_PARITY_PYTHON) for LSTM (2 layers, bidirectional,
// packed with enforce_sorted=false, total_length), GRU and RNN; outputs, h_n, c_n, the
// returned lengths and the gradients of the input, the states and every weight must agree to
// 1e-5 relative in float32 (|ember - torch| <= 1e-5 |torch| + 1e-6 max|torch| per element).
// Skipped with the reason when torch cannot be imported.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "core/serialization.h"
#include "nn/rnn.h"

namespace ember::nn {
namespace {

using utils::rnn::pack_padded_sequence;
using utils::rnn::pad_packed_sequence;
using Mode = detail::RnnMode;

constexpr double kRtol = 1e-5;

std::string python() {
  const char* p = std::getenv("EMBER_PARITY_PYTHON");
  return p != nullptr ? p : "/usr/bin/python3";
}

std::string script() {
  const char* src = std::getenv("EMBER_SOURCE_DIR");
  std::string root = src != nullptr ? src : EMBER_SOURCE_DIR_FALLBACK;
  return root + "/tests/nn/parity/rnn_parity.py";
}

bool torch_importable(std::string* why) {
  std::string cmd = python() + " -c 'import torch' >/dev/null 2>&1";
  if (std::system(cmd.c_str()) == 0) return true;
  *why = "PyTorch is not importable by " + python() + " (install Debian's python3-torch)";
  return false;
}

struct Case {
  std::string name;
  Mode mode;
  int64_t input_size, hidden_size, num_layers;
  bool bidirectional, batch_first, bias, has_h0;
  int64_t T, B, total_length;
  std::vector<int64_t> lengths;
};

std::string mode_string(Mode m) { return detail::mode_name(m); }

// Runs one case through ember; fills `inputs` (for torch) and `ours` (to compare).
template <class M, class Opts>
void run_ember(const Case& c, std::vector<std::pair<std::string, Tensor>>& inputs, std::map<std::string, Tensor>& ours) {
  Opts o(c.input_size, c.hidden_size);
  o.num_layers(c.num_layers).bidirectional(c.bidirectional).batch_first(c.batch_first).bias(c.bias);
  if constexpr (std::is_same_v<Opts, RNNOptions>) o.nonlinearity(c.mode == Mode::kRnnRelu ? "relu" : "tanh");
  M m(o);
  const std::string p = c.name + ".";
  const bool lstm = c.mode == Mode::kLstm;
  const int64_t D = c.bidirectional ? 2 : 1;
  Tensor x = c.batch_first ? randn({c.B, c.T, c.input_size}) : randn({c.T, c.B, c.input_size});
  Tensor h0 = randn({c.num_layers * D, c.B, c.hidden_size}), c0 = randn({c.num_layers * D, c.B, c.hidden_size});
  for (Tensor* t : {&x, &h0, &c0}) t->requires_grad_(true);
  for (auto& [n, w] : m.named_parameters()) inputs.emplace_back(p + "param." + n, w);
  inputs.emplace_back(p + "x", x);
  inputs.emplace_back(p + "lengths", from_vector<int64_t>(c.lengths));
  if (c.has_h0) {
    inputs.emplace_back(p + "h0", h0);
    if (lstm) inputs.emplace_back(p + "c0", c0);
  }

  auto packed = pack_padded_sequence(x, c.lengths, c.batch_first, /*enforce_sorted=*/false);
  Tensor out_padded, lens, h_n, c_n;
  if constexpr (std::is_same_v<M, LSTMImpl>) {
    auto [out, st] = c.has_h0 ? m.forward(packed, LSTMImpl::State{h0, c0}) : m.forward(packed);
    std::tie(out_padded, lens) = pad_packed_sequence(out, c.batch_first, 0.0, c.total_length);
    h_n = std::get<0>(st);
    c_n = std::get<1>(st);
  } else {
    auto [out, h] = c.has_h0 ? m.forward(packed, h0) : m.forward(packed);
    std::tie(out_padded, lens) = pad_packed_sequence(out, c.batch_first, 0.0, c.total_length);
    h_n = h;
  }
  Tensor gy = randn(out_padded.sizes()), gh = randn(h_n.sizes()), gc = randn(h_n.sizes());
  inputs.emplace_back(p + "gy", gy);
  inputs.emplace_back(p + "gh", gh);
  if (lstm) inputs.emplace_back(p + "gc", gc);
  Tensor loss = add(sum(mul(out_padded, gy)), sum(mul(h_n, gh)));
  if (lstm) loss = add(loss, sum(mul(c_n, gc)));
  loss.backward();

  ours[p + "output"] = out_padded;
  ours[p + "h_n"] = h_n;
  if (lstm) ours[p + "c_n"] = c_n;
  ours[p + "lengths_out"] = lens;
  ours[p + "grad.x"] = x.grad();
  if (c.has_h0) {
    ours[p + "grad.h0"] = h0.grad();
    if (lstm) ours[p + "grad.c0"] = c0.grad();
  }
  for (auto& [n, w] : m.named_parameters()) ours[p + "grad.param." + n] = w.grad();
}

std::string case_json(const Case& c) {
  std::ostringstream os;
  os << "{\"name\": \"" << c.name << "\", \"mode\": \"" << mode_string(c.mode) << "\", \"input_size\": " << c.input_size
     << ", \"hidden_size\": " << c.hidden_size << ", \"num_layers\": " << c.num_layers
     << ", \"bidirectional\": " << (c.bidirectional ? "true" : "false")
     << ", \"batch_first\": " << (c.batch_first ? "true" : "false") << ", \"bias\": " << (c.bias ? "true" : "false")
     << ", \"has_h0\": " << (c.has_h0 ? "true" : "false") << ", \"total_length\": " << c.total_length
     << ", \"enforce_sorted\": false}";
  return os.str();
}

TEST(RNNParity, MatchesPyTorchOutputsStatesAndGradients) {
  std::string why;
  if (!torch_importable(&why)) GTEST_SKIP() << why;
  manual_seed(2024);
  const std::vector<Case> cases{
      // LSTM: 2 layers, bidirectional, packed from an unsorted batch with ties, total_length > T.
      {"lstm", Mode::kLstm, 5, 7, 2, true, false, true, true, 6, 5, 8, {3, 6, 1, 4, 6}},
      {"lstm_bf", Mode::kLstm, 4, 6, 1, false, true, true, false, 5, 4, 5, {2, 5, 5, 3}},
      {"gru", Mode::kGru, 4, 6, 2, true, true, true, true, 7, 4, 9, {5, 2, 7, 2}},
      {"gru_nobias", Mode::kGru, 3, 5, 1, false, false, false, false, 4, 3, 4, {1, 4, 3}},
      {"rnn_tanh", Mode::kRnnTanh, 3, 4, 2, true, false, true, true, 5, 3, 6, {4, 5, 2}},
      {"rnn_relu", Mode::kRnnRelu, 3, 4, 1, false, true, true, false, 4, 3, 4, {4, 1, 3}},
  };
  std::vector<std::pair<std::string, Tensor>> inputs;
  std::map<std::string, Tensor> ours;
  std::string cases_json = "[";
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    if (c.mode == Mode::kLstm) {
      run_ember<LSTMImpl, LSTMOptions>(c, inputs, ours);
    } else if (c.mode == Mode::kGru) {
      run_ember<GRUImpl, GRUOptions>(c, inputs, ours);
    } else {
      run_ember<RNNImpl, RNNOptions>(c, inputs, ours);
    }
    if (i > 0) cases_json.append(", ");
    cases_json.append(case_json(c));
  }
  cases_json += "]";

  const auto dir = std::filesystem::temp_directory_path() / ("ember_rnn_parity_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string in_path = (dir / "in.safetensors").string(), out_path = (dir / "out.safetensors").string();
  save_safetensors(in_path, inputs, {{"cases", cases_json}});
  const std::string cmd = python() + " " + script() + " " + in_path + " " + out_path;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto theirs = load_safetensors(out_path);
  std::filesystem::remove_all(dir);

  ASSERT_EQ(theirs.size(), ours.size());
  for (const auto& [name, ref] : theirs) {
    SCOPED_TRACE(name);
    auto it = ours.find(name);
    ASSERT_TRUE(it != ours.end()) << "torch produced " << name << " but ember did not";
    const Tensor& got = it->second;
    ASSERT_TRUE(got.defined());
    ASSERT_EQ(got.sizes(), ref.sizes());
    if (ref.dtype() == kInt64) {
      EXPECT_EQ(got.to_vector<int64_t>(), ref.to_vector<int64_t>());
      continue;
    }
    auto g = native::to(got, kFloat64).to_vector<double>(), r = native::to(ref, kFloat64).to_vector<double>();
    double scale = 0, worst = 0, worst_scaled = 0;
    for (double v : r) scale = std::max(scale, std::abs(v));
    // rtol 1e-5 per element, plus an absolute 1e-6 of the tensor's own scale for the elements
    // that cancellation makes far smaller than their neighbours (float32 cannot resolve them
    // better than its epsilon times the magnitudes that were summed).
    const double atol = 1e-6 * scale;
    for (size_t i = 0; i < r.size(); ++i) {
      double err = std::abs(g[i] - r[i]);
      worst = std::max(worst, err / std::max(std::abs(r[i]), 1e-30));
      worst_scaled = std::max(worst_scaled, err / std::max(scale, 1e-30));
      EXPECT_LE(err, kRtol * std::abs(r[i]) + atol) << "element " << i << ": ember " << g[i] << " torch " << r[i];
      if (err > kRtol * std::abs(r[i]) + atol) break;
    }
    std::printf("%-40s max |diff|/max|torch| %.2g, max elementwise rel %.2g\n", name.c_str(), worst_scaled, worst);
  }
}

}  // namespace
}  // namespace ember::nn
