// ember-run's command-line parser and its output line prefixer, in-process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "launcher/launch_options.h"
#include "launcher/line_prefixer.h"
#include "tests/support/error_text.h"

namespace ember::launcher {
namespace {

LaunchOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "ember-run");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  return parse_launch_options(static_cast<int>(argv.size()), argv.data());
}

TEST(LaunchOptions, DefaultsAreOneLocalWorkerOnOneNode) {
  auto o = parse({"prog"});
  EXPECT_EQ(o.nproc_per_node, 1);
  EXPECT_EQ(o.nnodes, 1);
  EXPECT_EQ(o.world_size(), 1);
  EXPECT_EQ(o.master_port, 0);
  EXPECT_EQ(o.master_addr, "127.0.0.1");
  EXPECT_EQ(o.program, "prog");
  EXPECT_TRUE(o.program_args.empty());
}

TEST(LaunchOptions, AcceptsSpaceEqualsAndTorchrunUnderscores) {
  auto o = parse({"--nproc_per_node=4", "--nnodes", "2", "--node-rank=1", "--master_addr", "10.0.0.1",
                  "--master-port", "29500", "--max-restarts=3", "--log-dir", "/tmp/x",
                  "--monitor-interval-ms", "50", "prog", "a"});
  EXPECT_EQ(o.nproc_per_node, 4);
  EXPECT_EQ(o.nnodes, 2);
  EXPECT_EQ(o.node_rank, 1);
  EXPECT_EQ(o.world_size(), 8);
  EXPECT_EQ(o.master_addr, "10.0.0.1");
  EXPECT_EQ(o.master_port, 29500);
  EXPECT_EQ(o.max_restarts, 3);
  EXPECT_EQ(o.log_dir, "/tmp/x");
  EXPECT_EQ(o.monitor_interval_ms, 50);
  EXPECT_EQ(o.program_args, std::vector<std::string>{"a"});
}

TEST(LaunchOptions, EverythingAfterTheProgramBelongsToIt) {
  auto o = parse({"--nproc-per-node", "2", "prog", "--nproc-per-node", "9", "--", "-x"});
  EXPECT_EQ(o.nproc_per_node, 2);
  EXPECT_EQ(o.program, "prog");
  EXPECT_EQ(o.program_args, (std::vector<std::string>{"--nproc-per-node", "9", "--", "-x"}));
  auto dashed = parse({"--", "--looks-like-a-flag", "arg"});
  EXPECT_EQ(dashed.program, "--looks-like-a-flag");
}

// The UsageError's text for a command line that must be refused.
std::string message(std::vector<std::string> args) {
  return ember::support::error_of<UsageError>([&] { parse(std::move(args)); });
}

TEST(LaunchOptions, MistakesAreUsageErrorsThatSayWhat) {
  EXPECT_NE(message({}).find("no program"), std::string::npos);
  EXPECT_NE(message({"--nproc-per-node", "x", "p"}).find("--nproc-per-node: expected an integer, got 'x'"),
            std::string::npos);
  EXPECT_NE(message({"--nproc_per_node=2x", "p"}).find("expected an integer, got '2x'"), std::string::npos);
  EXPECT_NE(message({"--nproc-per-node", "-1", "p"}).find("expected an integer in ["), std::string::npos);
  EXPECT_NE(message({"--max-restarts"}).find("--max-restarts"), std::string::npos);
  EXPECT_NE(message({"--cpu-bind", "some", "p"}).find("--cpu-bind: expected auto or none, got 'some'"),
            std::string::npos);
  EXPECT_NE(message({"--what", "p"}).find("unknown option '--what'"), std::string::npos);
  EXPECT_NE(message({"-n", "p"}).find("unknown option '-n'"), std::string::npos);
  EXPECT_NE(message({"--nnodes", "2", "p"}).find("--master-port"), std::string::npos);
  EXPECT_NE(message({"--nnodes", "2", "--node-rank", "2", "--master-port", "1", "p"}).find("--node-rank"),
            std::string::npos);
  EXPECT_NE(message({"--master-port", "65536", "p"}).find("expected an integer in ["), std::string::npos);
  EXPECT_TRUE(parse({"--help"}).help);
}

TEST(LaunchOptions, FaultToleranceFlags) {
  auto o = parse({"--ft", "--ft-timeout", "2.5", "--ft-min-ranks=3", "--ft_quorum_timeout", "7", "--nproc-per-node",
                  "4", "prog"});
  EXPECT_TRUE(o.ft);
  EXPECT_EQ(o.ft_timeout_ms, 2500);
  EXPECT_EQ(o.ft_min_ranks, 3);
  EXPECT_EQ(o.ft_quorum_timeout_ms, 7000);
  const LaunchOptions d = parse({"prog"});
  EXPECT_FALSE(d.ft);
  EXPECT_EQ(d.ft_timeout_ms, 10'000);
  EXPECT_NE(message({"--ft-timeout", "2", "p"}).find("need --ft"), std::string::npos);
  EXPECT_NE(message({"--ft", "--ft-min-ranks", "3", "--nproc-per-node", "2", "p"}).find("more than the 2 ranks"),
            std::string::npos);
  EXPECT_NE(message({"--ft", "--ft-timeout", "soon", "p"}).find("--ft-timeout"), std::string::npos);
}

TEST(LaunchOptions, UsageListsEveryFlag) {
  const std::string usage = usage_text();
  for (const char* flag : {"--nproc-per-node", "--nnodes", "--node-rank", "--master-addr", "--master-port",
                           "--local-addr", "--max-restarts", "--log-dir", "--monitor-interval-ms", "--stop-timeout-ms",
                           "--cpu-bind", "--ft", "--ft-timeout", "--ft-min-ranks", "--ft-quorum-timeout", "program"})
    EXPECT_NE(usage.find(flag), std::string::npos) << flag << " missing from:\n" << usage;
}

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST(LinePrefixer, PrefixesWholeLinesAcrossFragmentsAndFlushesTheTail) {
  int out[2], log[2];
  ASSERT_EQ(::pipe(out), 0);
  ASSERT_EQ(::pipe(log), 0);
  {
    LinePrefixer p("[rank 3]: ", out[1], log[1]);
    p.feed("hel", 3);
    p.feed("lo\nwor", 6);
    p.feed("ld\n\nlast", 8);
    p.finish();
    p.finish();  // idempotent
  }
  ::close(out[1]);
  ::close(log[1]);
  EXPECT_EQ(read_all(out[0]), "[rank 3]: hello\n[rank 3]: world\n[rank 3]: \n[rank 3]: last\n");
  EXPECT_EQ(read_all(log[0]), "hello\nworld\n\nlast\n");
  ::close(out[0]);
  ::close(log[0]);
}

TEST(LinePrefixer, CutsOverlongLines) {
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  std::string got;
  std::thread reader([&] { got = read_all(out[0]); });
  {
    LinePrefixer p("> ", out[1]);
    std::string big(LinePrefixer::kMaxLineBytes + 10, 'x');
    p.feed(big.data(), big.size());
    p.finish();
  }
  ::close(out[1]);
  reader.join();
  ::close(out[0]);
  EXPECT_EQ(got, "> " + std::string(LinePrefixer::kMaxLineBytes, 'x') + "\n> xxxxxxxxxx\n");
}

}  // namespace
}  // namespace ember::launcher
