// parse_job_flag (examples/common/cli.h): the flags every example's training job takes (--ddp,
// --backend, --timeout, --seed, --threads, --resume), read into the fields an example names,
// with the ValueErrors the examples' parsers give; any other flag is left to the example.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "examples/common/cli.h"
#include "tests/support/error_text.h"

namespace ember_examples {
namespace {

using ember::support::error_of;

struct Fields {
  bool ddp = false;
  std::string backend;
  int64_t timeout_s = 300;
  uint64_t seed = 1111;
  int threads = 0;
  bool resume = false;
  std::vector<std::string> others;  // flags parse_job_flag left alone

  JobFlags flags() { return {ddp, backend, timeout_s, seed, threads, resume}; }
};

Fields parse(std::vector<const char*> args) {
  args.insert(args.begin(), "example");
  Fields f;
  for (ArgReader a(static_cast<int>(args.size()), args.data()); a.next();) {
    if (!parse_job_flag(a, f.flags())) f.others.push_back(a.flag());
  }
  return f;
}

TEST(JobFlags, EachFlagLandsInItsField) {
  const Fields f = parse({"--ddp", "--backend", "nccl", "--timeout=9", "--seed", "5", "--threads", "2", "--resume"});
  EXPECT_TRUE(f.ddp);
  EXPECT_EQ(f.backend, "nccl");
  EXPECT_EQ(f.timeout_s, 9);
  EXPECT_EQ(f.seed, 5u);
  EXPECT_EQ(f.threads, 2);
  EXPECT_TRUE(f.resume);
  EXPECT_TRUE(f.others.empty());
}

TEST(JobFlags, OtherFlagsAreLeftToTheExampleAndDefaultsKept) {
  const Fields f = parse({"--epochs", "--seed=0", "--lr"});
  EXPECT_EQ(f.others, (std::vector<std::string>{"--epochs", "--lr"}));
  EXPECT_EQ(f.seed, 0u);
  EXPECT_FALSE(f.ddp);
  EXPECT_EQ(f.timeout_s, 300);
}

TEST(JobFlags, BadValuesAreValueErrorsNamingTheFlag) {
  using V = std::vector<const char*>;
  EXPECT_NE(error_of<ember::ValueError>([] { parse(V{"--backend", "gloo"}); })
                .find("--backend: expected tcp, mpi or nccl, got 'gloo'"),
            std::string::npos);
  EXPECT_NE(error_of<ember::ValueError>([] { parse(V{"--timeout", "0"}); }).find("--timeout: expected at least 1, got 0"),
            std::string::npos);
  EXPECT_NE(error_of<ember::ValueError>([] { parse(V{"--threads", "0"}); }).find("--threads: expected at least 1"),
            std::string::npos);
  EXPECT_NE(error_of<ember::ValueError>([] { parse(V{"--seed", "-1"}); }).find("--seed: expected at least 0"),
            std::string::npos);
  EXPECT_NE(error_of<ember::ValueError>([] { parse(V{"--resume=yes"}); }).find("--resume takes no value"),
            std::string::npos);
  EXPECT_NE(error_of<ember::ValueError>([] { parse(V{"--seed"}); }).find("--seed: expected a value"),
            std::string::npos);
}

}  // namespace
}  // namespace ember_examples
