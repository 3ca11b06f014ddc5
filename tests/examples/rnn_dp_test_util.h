// What the rnn_dp tests share: whether the word lists are installed, running a command and
// collecting its output, a command line that must be refused, the metrics file, and comparing the model tensors of two checkpoints.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/serialization.h"
#include "examples/rnn_dp/wordlang_dataset.h"

namespace rnn_dp_test {

inline const char* kDictDir = "/usr/share/dict";

inline bool have_word_lists() {
  for (const auto& lang : rnn_dp::kLanguages) {
    if (!std::filesystem::exists(std::filesystem::path(kDictDir) / lang.file)) return false;
  }
  return true;
}

#define SKIP_WITHOUT_WORD_LISTS()                                                                         \
  if (!rnn_dp_test::have_word_lists())                                                                    \
  GTEST_SKIP() << "the word lists are not installed in " << rnn_dp_test::kDictDir                          \
               << " (scripts/setup.sh installs wamerican, wngerman, ...)"

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

/// Runs `cmd` through the shell with stderr joined to stdout; exit code 128 + N for signal N.
inline RunResult run_command(const std::string& cmd) {
  RunResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return r;
}

/// Each of `cases` (arguments, a piece of the expected message): `program` with those arguments
/// exits with code 2 (a bad command line) and says so.
inline void expect_refused(const std::string& program, const std::vector<std::pair<std::string, std::string>>& cases) {
  for (const auto& [args, text] : cases) {
    RunResult r = run_command(program + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(text), std::string::npos) << args << "\n" << r.output;
  }
}

inline std::vector<nlohmann::json> read_metrics(const std::filesystem::path& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

/// The tensors of a checkpoint whose names start with `prefix` ("model.": the parameters).
inline std::map<std::string, ember::Tensor> model_tensors(const std::filesystem::path& path,
                                                          const std::string& prefix = "model.") {
  std::map<std::string, ember::Tensor> out;
  for (auto& [name, t] : ember::load_safetensors(path.string())) {
    if (name.rfind(prefix, 0) == 0) out.emplace(name, t);
  }
  return out;
}

/// Every model tensor of checkpoint `a` (or, with another prefix, e.g. "optim.", every such
/// tensor) equals `b`'s within `tol` (largest absolute difference).
inline void expect_same_parameters(const std::filesystem::path& a, const std::filesystem::path& b, double tol,
                                   const std::string& prefix = "model.") {
  auto ta = model_tensors(a, prefix), tb = model_tensors(b, prefix);
  ASSERT_FALSE(ta.empty()) << a;
  ASSERT_EQ(ta.size(), tb.size());
  for (auto& [name, x] : ta) {
    ASSERT_TRUE(tb.count(name)) << name;
    const ember::Tensor& y = tb.at(name);
    ASSERT_EQ(x.sizes(), y.sizes()) << name;
    auto vx = x.to_vector<double>(), vy = y.to_vector<double>();
    double worst = 0;
    for (size_t i = 0; i < vx.size(); ++i) worst = std::max(worst, std::abs(vx[i] - vy[i]));
    EXPECT_LE(worst, tol) << name << ": largest difference " << worst;
  }
}

}  // namespace rnn_dp_test
