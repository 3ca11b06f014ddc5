// examples/rnn_dp --ddp --ft under `ember-run --ft` on 4 ranks (CPU, tcp), with faults injected by
// --ft-fault (a rank raises SIGKILL or SIGSTOP on itself at a given step and point:
// examples/common/ft_job.h), and on two ember-run --ft "nodes" of 2 ranks, one of which is
// SIGKILLed and started again. Every run checks, from the ranks' "step-trace" lines
// (tests/examples/ft_trace_util.h): every step 0..N-1 was committed, no rank committed a step
// twice or out of order, every rank that committed a step holds the same parameters after it
// (hash), and, with --deterministic, the final checkpoint's SHA-256 equals the undisturbed
// one-process run's.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <string>

#include "tests/examples/deterministic_state_hash.h"
#include "tests/examples/ft_trace_util.h"
#include "tests/examples/rnn_dp_process_util.h"
#include "tests/examples/rnn_dp_test_util.h"

namespace {

using rnn_dp_test::RunResult;
std::string state_sha256(const std::filesystem::path& checkpoint) {
  return deterministic_test::state_sha256(checkpoint, 8);
}
namespace fs = std::filesystem;

// 384 training words in global batches of 48 over 8 shards: 8 steps an epoch, 40 steps.
constexpr int kSteps = 40;
const std::string kDet = "--limit 64 --batch-size 48 --epochs 5 --max-steps 40 --dropout 0.3 --progress none "
                         "--deterministic --shards 8 --workers 0 --threads 1";

using ft_test::parse;
using ft_test::Trace;

class RnnDpFt : public rnn_dp_test::RunDirTest {
 protected:
  // The undisturbed one-process run's state hash, once per test program.
  std::string reference() {
    static std::string ref;
    if (ref.empty()) {
      RunResult r = rnn_dp("ref", kDet + " --single-device");
      EXPECT_EQ(r.exit_code, 0) << r.output;
      ref = state_sha256(last("ref"));
    }
    return ref;
  }
  RunResult ft_run(const std::string& name, const std::string& faults, const std::string& launcher = "") {
    return rnn_dp_test::run_command(std::string(EMBER_RUN_BINARY) + " --ft --ft-timeout 3 --max-restarts 2 " +
                                    launcher + " --nproc-per-node 4 " + RNN_DP_BINARY + " --ddp --ft --trace-steps " +
                                    files(name) + " " + kDet + (faults.empty() ? "" : " --ft-fault " + faults));
  }
  // The checks every run gets (see the file comment).
  void expect_transactional(const std::string& name, const RunResult& r) {
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ft_test::expect_transactional(r.output, kSteps);
    EXPECT_EQ(state_sha256(last(name)), reference()) << r.output;
  }
};

TEST_F(RnnDpFt, UndisturbedRunEqualsOneProcess) {
  SKIP_WITHOUT_WORD_LISTS();
  RunResult r = ft_run("calm", "");
  expect_transactional("calm", r);
  for (const auto& [step, n] : parse(r.output).ranks) EXPECT_EQ(n, 4) << "step " << step;
}

TEST_F(RnnDpFt, KilledRankMidAllReduceIsReplacedAndNothingChanges) {
  SKIP_WITHOUT_WORD_LISTS();
  // Rank 0 straggles at step 8 so that the replacement (a new process) is up before the end.
  RunResult r = ft_run("kill1", "1:0:5:backward:KILL,0:0:8:commit:SLEEP2500");
  expect_transactional("kill1", r);
  const Trace t = parse(r.output);
  EXPECT_EQ(t.ranks.at(5), 3) << "step 5 was redone by the 3 survivors\n" << r.output;
  // The quorum that dropped it says why: the launcher's death mark, or its replacement already.
  EXPECT_TRUE(std::regex_search(r.output, std::regex("ranks \\(slots 0, 2, 3\\); slot 1 (died|was replaced)")))
      << r.output;
  EXPECT_NE(r.output.find("starting a replacement for rank 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no checkpoint read"), std::string::npos) << r.output;
  EXPECT_EQ(t.ranks.at(kSteps - 1), 4) << "the replacement took part again\n" << r.output;
}

TEST_F(RnnDpFt, TwoRanksKilledAtOnce) {
  SKIP_WITHOUT_WORD_LISTS();
  RunResult r = ft_run("kill2", "1:0:5:forward:KILL,2:0:5:forward:KILL");
  expect_transactional("kill2", r);
  EXPECT_EQ(parse(r.output).ranks.at(5), 2) << r.output;
}

TEST_F(RnnDpFt, RankZeroIsNotSpecial) {
  SKIP_WITHOUT_WORD_LISTS();
  RunResult r = ft_run("kill0", "0:0:5:backward:KILL");
  expect_transactional("kill0", r);
  EXPECT_EQ(parse(r.output).ranks.at(5), 3) << r.output;
}

TEST_F(RnnDpFt, StoppedRankIsKilledAfterTheTimeoutAndReplaced) {
  SKIP_WITHOUT_WORD_LISTS();
  RunResult r = ft_run("stop", "3:0:5:backward:STOP");
  expect_transactional("stop", r);
  EXPECT_NE(r.output.find("went silent past --ft-timeout"), std::string::npos) << r.output;
  EXPECT_EQ(parse(r.output).ranks.at(5), 3) << r.output;
}

TEST_F(RnnDpFt, ReplacementKilledBeforeItCommits) {
  SKIP_WITHOUT_WORD_LISTS();
  // Rank 0 straggles twice, so that each replacement is up before the end.
  RunResult r =
      ft_run("killnew", "2:0:3:backward:KILL,2:1:*:loaded:KILL,0:0:4:commit:SLEEP2500,0:0:7:commit:SLEEP2500");
  expect_transactional("killnew", r);
  EXPECT_NE(r.output.find("ft-fault: slot 2 raising SIGKILL"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("slot 2 (incarnation 2) joined at step"), std::string::npos)
      << "a second replacement joined\n" << r.output;
  EXPECT_EQ(parse(r.output).ranks.at(kSteps - 1), 4) << r.output;
}

TEST_F(RnnDpFt, BelowMinimumRanksFailsNamingTheMissingRank) {
  SKIP_WITHOUT_WORD_LISTS();
  RunResult r = rnn_dp_test::run_command(
      std::string(EMBER_RUN_BINARY) + " --ft --ft-timeout 3 --ft-min-ranks 4 --ft-quorum-timeout 1 --max-restarts 0 "
      "--nproc-per-node 4 " + RNN_DP_BINARY + " --ddp --ft " + files("short") + " " + kDet +
      " --ft-fault 1:0:3:forward:KILL");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("below the minimum of 4; missing rank slot(s) 1"), std::string::npos) << r.output;
}

TEST_F(RnnDpFt, StoreLossEndsTheJobInsteadOfHanging) {
  SKIP_WITHOUT_WORD_LISTS();
  const fs::path log = dir_ / "storeloss.log";
  rnn_dp_test::Child run = rnn_dp_test::spawn(
      {EMBER_RUN_BINARY, "--ft", "--nproc-per-node", "2", RNN_DP_BINARY, "--ddp", "--ft", "--trace-steps", "--dict-dir",
       rnn_dp_test::kDictDir, "--checkpoint-dir", (dir_ / "storeloss").string(), "--limit", "64", "--batch-size", "48",
       "--epochs", "1000", "--shards", "8", "--workers", "0", "--threads", "1", "--progress", "none"},
      {}, log);
  ASSERT_GT(run.pid, 0);
  ASSERT_TRUE(rnn_dp_test::wait_for(log, std::regex("step-trace step=3 "), std::chrono::seconds(120)))
      << rnn_dp_test::read_file(log);
  std::vector<int> pids;
  const std::string text = rnn_dp_test::read_file(log);
  static const std::regex pid_line(R"(incarnation 0, pid (\d+),)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), pid_line); it != std::sregex_iterator(); ++it)
    pids.push_back(std::stoi((*it)[1]));
  ASSERT_EQ(pids.size(), 2u) << text;
  ::kill(run.pid, SIGKILL);  // ember-run and the store it hosts
  ::waitpid(run.pid, nullptr, 0);
  const auto deadline = rnn_dp_test::Clock::now() + std::chrono::seconds(15);
  for (int pid : pids) {
    while (::kill(pid, 0) == 0 && rnn_dp_test::Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_NE(::kill(pid, 0), 0) << "rank pid " << pid << " outlived the store";
  }
}

// ---- several nodes -------------------------------------------------------------------------------

// Two `ember-run --ft` "nodes" of 2 ranks each on loopback, sharing node 0's store (one token):
// node n holds rank slots 2n and 2n + 1.
class FtNodes {
 public:
  FtNodes(const fs::path& dir, std::string args) : dir_(dir), port_(rnn_dp_test::free_port()), args_(std::move(args)) {}
  rnn_dp_test::Child start(int node, const std::string& tag) const {
    return rnn_dp_test::spawn(
        rnn_dp_test::words(std::string(EMBER_RUN_BINARY) + " --ft --ft-timeout 2 --nnodes 2 --node-rank " +
                           std::to_string(node) + " --nproc-per-node 2 --master-addr 127.0.0.1 --master-port " +
                           std::to_string(port_) + " " + RNN_DP_BINARY + " --ddp --ft --trace-steps " + args_),
        {"EMBER_STORE_TOKEN=rnn-dp-ft-nodes"}, dir_ / ("node" + std::to_string(node) + "-" + tag + ".log"));
  }

 private:
  fs::path dir_;
  int port_;
  std::string args_;
};

// The pids of the ranks a log announced ("rank slot S (incarnation I, pid P, ...").
std::vector<int> rank_pids(const std::string& log) {
  std::vector<int> pids;
  static const std::regex line(R"(rank slot \d+ \(incarnation \d+, pid (\d+),)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it)
    pids.push_back(std::stoi((*it)[1]));
  return pids;
}

// Whether every pid is gone within `timeout`.
bool all_gone(const std::vector<int>& pids, std::chrono::seconds timeout) {
  const auto deadline = rnn_dp_test::Clock::now() + timeout;
  for (int pid : pids)
    while (::kill(pid, 0) == 0) {
      if (rnn_dp_test::Clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  return true;
}

TEST_F(RnnDpFt, LostNodeTakesItsRanksAndANewOneJoins) {
  SKIP_WITHOUT_WORD_LISTS();
  // Slot 0 straggles 200 ms at every commit, so that node 1's second ember-run is up before the end.
  FtNodes nodes(dir_, files("nodes") + " " + kDet + " --ft-fault 0:0:*:commit:SLEEP200");
  rnn_dp_test::Child n1 = nodes.start(1, "a");  // the later node may start first
  rnn_dp_test::Child n0 = nodes.start(0, "a");
  ASSERT_GT(n0.pid, 0);
  ASSERT_GT(n1.pid, 0);
  ASSERT_TRUE(rnn_dp_test::wait_for(n1.log, std::regex("step-trace step=4 "), std::chrono::seconds(120)))
      << rnn_dp_test::read_file(n0.log) << rnn_dp_test::read_file(n1.log);
  const std::vector<int> node1_ranks = rank_pids(rnn_dp_test::read_file(n1.log));
  ASSERT_EQ(node1_ranks.size(), 2u) << rnn_dp_test::read_file(n1.log);
  ::kill(n1.pid, SIGKILL);  // node 1's ember-run: nobody writes its ranks' death marks
  ::waitpid(n1.pid, nullptr, 0);
  EXPECT_TRUE(all_gone(node1_ranks, std::chrono::seconds(10))) << "node 1's ranks outlived its ember-run";
  // Node 0's ranks drop the silent slots after --ft-timeout and commit steps on their own.
  EXPECT_TRUE(
      rnn_dp_test::wait_for(n0.log, std::regex("step-trace step=\\d+ slot=0 ranks=2 "), std::chrono::seconds(30)))
      << rnn_dp_test::read_file(n0.log);
  rnn_dp_test::Child n1b = nodes.start(1, "b");  // the same command again: the replacement node
  const auto s0 = rnn_dp_test::wait_exit(n0.pid, std::chrono::seconds(120));
  const auto s1 = rnn_dp_test::wait_exit(n1b.pid, std::chrono::seconds(30));
  RunResult r;
  r.output = rnn_dp_test::read_file(n0.log) + rnn_dp_test::read_file(n1.log) + rnn_dp_test::read_file(n1b.log);
  ASSERT_TRUE(s0 && WIFEXITED(*s0) && WEXITSTATUS(*s0) == 0) << r.output;
  ASSERT_TRUE(s1 && WIFEXITED(*s1) && WEXITSTATUS(*s1) == 0) << r.output;
  r.exit_code = 0;
  expect_transactional("nodes", r);
  const Trace t = parse(r.output);
  EXPECT_NE(r.output.find("ranks (slots 0, 1); slot 2 "), std::string::npos) << r.output;
  EXPECT_EQ(t.ranks.at(kSteps - 1), 4) << "the new node's ranks took part\n" << r.output;
  const std::string second = rnn_dp_test::read_file(n1b.log);
  EXPECT_TRUE(std::regex_search(second, std::regex("slot [23] \\(incarnation 1\\) joined at step \\d+: state "
                                                   "received from slot [01] .*no checkpoint read")))
      << second;
}

TEST_F(RnnDpFt, LostNodeZeroFailsTheOtherNodeInsteadOfHanging) {
  SKIP_WITHOUT_WORD_LISTS();
  FtNodes nodes(dir_, files("node0loss") + " --limit 64 --batch-size 48 --epochs 1000 --shards 8 --workers 0 "
                                           "--threads 1 --progress none");
  rnn_dp_test::Child n0 = nodes.start(0, "a");
  rnn_dp_test::Child n1 = nodes.start(1, "a");
  ASSERT_TRUE(rnn_dp_test::wait_for(n1.log, std::regex("step-trace step=3 "), std::chrono::seconds(120)))
      << rnn_dp_test::read_file(n0.log) << rnn_dp_test::read_file(n1.log);
  const std::vector<int> node1_ranks = rank_pids(rnn_dp_test::read_file(n1.log));
  ::kill(n0.pid, SIGKILL);  // node 0's ember-run and the store it hosts
  ::waitpid(n0.pid, nullptr, 0);
  const auto t0 = rnn_dp_test::Clock::now();
  const auto s1 = rnn_dp_test::wait_exit(n1.pid, std::chrono::seconds(20));
  const std::string out = rnn_dp_test::read_file(n1.log);
  ASSERT_TRUE(s1.has_value()) << "node 1's ember-run hung after the store died\n" << out;
  EXPECT_TRUE(WIFEXITED(*s1) && WEXITSTATUS(*s1) != 0) << out;
  EXPECT_LT(rnn_dp_test::Clock::now() - t0, std::chrono::seconds(12)) << out;
  EXPECT_NE(out.find("ember-run: error: lost the job's store at 127.0.0.1:"), std::string::npos) << out;
  EXPECT_TRUE(all_gone(node1_ranks, std::chrono::seconds(5))) << out;
}

TEST_F(RnnDpFt, BadOptionsAreRefused) {
  rnn_dp_test::expect_refused(RNN_DP_BINARY, {
      {"--ft", "--ft applies only with --ddp"},
      {"--ddp --ft --zero", "--ft: --zero, --uneven, --amp, --augment and --resume are not supported"},
      {"--trace-steps", "--trace-steps applies only with --ddp"}});
  RunResult r = rnn_dp_test::run_command(std::string(RNN_DP_BINARY) + " --ddp --ft --limit 64 --dict-dir " +
                                         rnn_dp_test::kDictDir);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("ember-run --ft"), std::string::npos) << r.output;
}

}  // namespace
