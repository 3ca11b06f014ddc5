// The checks of a fault-tolerant example run (rnn_dp or word_lm --ddp --ft --trace-steps under
// ember-run --ft), from the ranks' "step-trace step=S slot=R ranks=W hash=H" lines
// (examples/common/ft_job.h): every step 0..N-1 was committed, no rank committed a step twice or
// out of order, and every rank that committed a step holds the same parameters after it.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace ft_test {

struct Trace {
  std::map<int64_t, std::set<std::string>> hashes;  // step -> the hashes ranks reported
  std::map<int, std::vector<int64_t>> steps;        // slot -> its committed steps in order
  std::map<int64_t, int> ranks;                     // step -> participants
};

inline Trace parse(const std::string& output) {
  Trace t;
  static const std::regex line(R"(step-trace step=(\d+) slot=(\d+) ranks=(\d+) hash=([0-9a-f]+))");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it) {
    const int64_t step = std::stoll((*it)[1]);
    t.hashes[step].insert((*it)[4]);
    t.steps[std::stoi((*it)[2])].push_back(step);
    t.ranks[step] = std::stoi((*it)[3]);
  }
  return t;
}

/// The checks of the file comment over `steps` steps; `output` is every rank's output, each
/// slot's lines in the order its incarnations ran.
inline void expect_transactional(const std::string& output, int64_t steps) {
  const Trace t = parse(output);
  for (int64_t s = 0; s < steps; ++s) {
    ASSERT_TRUE(t.hashes.count(s)) << "step " << s << " was never committed\n" << output;
    EXPECT_EQ(t.hashes.at(s).size(), 1u) << "ranks disagree after step " << s << "\n" << output;
  }
  EXPECT_EQ(t.hashes.rbegin()->first, steps - 1) << output;
  for (const auto& [slot, committed] : t.steps)
    for (size_t i = 1; i < committed.size(); ++i)
      EXPECT_GT(committed[i], committed[i - 1])
          << "slot " << slot << " committed step " << committed[i] << " twice or late\n" << output;
}

}  // namespace ft_test
