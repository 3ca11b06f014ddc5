// add_job_flags (examples/common/cli.h): the flags every example's training job takes (--ddp,
// --backend, --timeout, --seed, --threads, --resume), read into the fields an example names,
// with the ValueErrors the examples' command lines give; ember::cli::parse makes any other flag
// an error.
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
  bool help = false;

  JobFlags flags() { return {ddp, backend, timeout_s, seed, threads, resume}; }
};

Fields parse(std::vector<const char*> args) {
  args.insert(args.begin(), "example");
  Fields f;
  auto app = ember::cli::make_app("example", "a job");
  add_job_flags(*app, f.flags(), "tcp");
  f.help = !ember::cli::parse(*app, static_cast<int>(args.size()), args.data());
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
  EXPECT_FALSE(f.help);
}

TEST(JobFlags, DefaultsAreKeptAndTheLastRepeatWins) {
  const Fields f = parse({"--seed=0", "--timeout", "7", "--timeout", "8"});
  EXPECT_EQ(f.seed, 0u);
  EXPECT_EQ(f.timeout_s, 8);
  EXPECT_FALSE(f.ddp);
  EXPECT_EQ(f.threads, 0);
  EXPECT_TRUE(parse({"--help"}).help);
}

TEST(JobFlags, BadValuesAreValueErrorsNamingTheFlag) {
  using V = std::vector<const char*>;
  EXPECT_NE(error_of<ember::ValueError>([] { parse(V{"--backend", "gloo"}); })
                .find("--backend: expected tcp, mpi or nccl, got 'gloo'"),
            std::string::npos);
  EXPECT_NE(error_of<ember::ValueError>([] { parse(V{"--timeout", "0"}); }).find("--timeout: expected at least 1, got 0"),
            std::string::npos);
  EXPECT_NE(error_of<ember::ValueError>([] { parse(V{"--timeout", "9x"}); })
                .find("--timeout: expected an integer, got '9x'"),
            std::string::npos);
  EXPECT_NE(error_of<ember::ValueError>([] { parse(V{"--threads", "0"}); }).find("--threads: expected at least 1"),
            std::string::npos);
  EXPECT_NE(error_of<ember::ValueError>([] { parse(V{"--seed", "-1"}); }).find("--seed: expected at least 0"),
            std::string::npos);
  EXPECT_NE(error_of<ember::ValueError>([] { parse(V{"--resume=yes"}); }).find("resume was given a disallowed flag override"), std::string::npos);
  EXPECT_NE(error_of<ember::ValueError>([] { parse(V{"--seed"}); }).find("--seed: 1 required"), std::string::npos);
}

TEST(JobFlags, UnknownFlagsAndStrayArgumentsAreErrors) {
  using V = std::vector<const char*>;
  EXPECT_NE(error_of<ember::ValueError>([] { parse(V{"--epochs", "3"}); }).find("--epochs"), std::string::npos);
  EXPECT_NE(error_of<ember::ValueError>([] { parse(V{"stray"}); }).find("stray"), std::string::npos);
}

}  // namespace
}  // namespace ember_examples
