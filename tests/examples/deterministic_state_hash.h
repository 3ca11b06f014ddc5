// The SHA-256 that the deterministic example tests compare: every tensor of a checkpoint
// (parameters, buffers, optimizer state), in name order, as name, NUL, raw bytes, hashed by
// sha256sum. Used from a test's main thread.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "core/serialization.h"
#include "tests/examples/rnn_dp_process_util.h"

namespace deterministic_test {

/// `min_tensors`: a sanity bound on what the checkpoint holds.
inline std::string state_sha256(const std::filesystem::path& checkpoint, size_t min_tensors) {
  const auto tensors = ember::load_safetensors_map(checkpoint.string());
  EXPECT_GE(tensors.size(), min_tensors) << checkpoint;
  const std::filesystem::path dump = checkpoint.string() + ".dump";
  {
    std::ofstream out(dump, std::ios::binary);
    for (const auto& [name, t] : std::map<std::string, ember::Tensor>(tensors.begin(), tensors.end())) {
      out.write(name.c_str(), static_cast<std::streamsize>(name.size() + 1));
      out.write(static_cast<const char*>(t.raw_data()), static_cast<std::streamsize>(t.nbytes()));
    }
  }
  rnn_dp_test::RunResult r = rnn_dp_test::run_command("sha256sum " + dump.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.output.substr(0, 64);
}

}  // namespace deterministic_test
