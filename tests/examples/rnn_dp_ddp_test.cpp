// examples/rnn_dp --ddp end to end: the real binary as 2 and 3 ranks under ember-run and as 2
// ranks under mpirun follows the single-process run on the same global batch (see Note [DDP
// mode] in examples/rnn_dp/train.cpp); only rank 0 prints and checkpoints; a rank killed
// mid-training makes the other fail with DistributedError naming it; ember-run reports the
// killed rank, restarts the group, and the restarted job resumes from the last checkpoint and
// ends exactly where an uninterrupted job does.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/examples/rnn_dp_process_util.h"
#include "tests/examples/rnn_dp_test_util.h"

extern char** environ;

// Inside rnn_dp_test: its helpers and the --ddp arguments (kSmall, kLong) need no qualification.
namespace rnn_dp_test {
namespace {

class RnnDpDdp : public rnn_dp_test::RunDirTest {};

// Only rank 0 reports; every rank announces itself once.
void expect_rank0_reports(const std::string& out, int world, int epochs) {
  for (int r = 0; r < world; ++r) {
    EXPECT_NE(out.find("rnn_dp: rank " + std::to_string(r) + " of " + std::to_string(world)), std::string::npos)
        << out;
  }
  for (int e = 1; e <= epochs; ++e) {
    EXPECT_NE(out.find("[rank 0]: epoch=" + std::to_string(e) + " "), std::string::npos) << out;
  }
  for (int r = 1; r < world; ++r) {
    EXPECT_EQ(out.find("[rank " + std::to_string(r) + "]: epoch="), std::string::npos) << out;
    EXPECT_EQ(out.find("[rank " + std::to_string(r) + "]: rnn_dp: data"), std::string::npos) << out;
  }
}

TEST_F(RnnDpDdp, TwoAndThreeRanksUnderEmberRunFollowTheSingleProcess) {
  SKIP_WITHOUT_WORD_LISTS();
  for (int world : {2, 3}) {
    SCOPED_TRACE("world " + std::to_string(world));
    const std::string batch = world == 2 ? "--batch-size 64" : "--batch-size 48";
    const std::string ddp = "ddp" + std::to_string(world), single = "single" + std::to_string(world);
    RunResult r = ember_run(world, ddp, kSmall + " --epochs 2 " + batch);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    expect_rank0_reports(r.output, world, 2);
    EXPECT_NE(r.output.find("DistributedDataParallel over " + std::to_string(world) + " ranks (tcp backend)"),
              std::string::npos)
        << r.output;
    RunResult s = rnn_dp(single, kSmall + " --epochs 2 --single-device " + batch);
    ASSERT_EQ(s.exit_code, 0) << s.output;

    auto a = read_metrics(metrics(ddp)), b = read_metrics(metrics(single));
    ASSERT_EQ(a.size(), 2u) << "rank 0 alone writes one line per epoch";
    ASSERT_EQ(b.size(), 2u);
    for (int e = 0; e < 2; ++e) {
      EXPECT_EQ(a[e]["ddp_world_size"].get<int>(), world);
      EXPECT_FALSE(a[e]["data_parallel"].get<bool>());
      EXPECT_NEAR(a[e]["loss"].get<double>(), b[e]["loss"].get<double>(), 1e-5) << "epoch " << e + 1;
      EXPECT_NEAR(a[e]["test_acc"].get<double>(), b[e]["test_acc"].get<double>(), 1.0 / 384) << "epoch " << e + 1;
    }
    EXPECT_TRUE(fs::exists(dir_ / ddp / "ckpt" / "epoch-1.safetensors"));
    expect_same_parameters(last(ddp), last(single), 1e-5);
  }
}

TEST_F(RnnDpDdp, TwoRanksUnderMpirunFollowTheSingleProcess) {
  SKIP_WITHOUT_WORD_LISTS();
#ifndef RNN_DP_MPIRUN
  GTEST_SKIP() << "built without MPI (EMBER_HAVE_MPI off): no mpi backend to test";
#else
  RunResult r = run_command(std::string(RNN_DP_MPIRUN) + " --allow-run-as-root --oversubscribe -np 2 " +
                            RNN_DP_BINARY + " --ddp " + files("mpi") + " " + kSmall + " --epochs 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("DistributedDataParallel over 2 ranks (mpi backend)"), std::string::npos) << r.output;
  // mpirun does not prefix lines: count them instead. One epoch line each, from rank 0.
  for (const char* line : {"epoch=1 ", "epoch=2 ", "rnn_dp: data "}) {
    size_t n = 0;
    for (size_t at = r.output.find(line); at != std::string::npos; at = r.output.find(line, at + 1)) ++n;
    EXPECT_EQ(n, 1u) << line << "\n" << r.output;
  }
  RunResult s = rnn_dp("single", kSmall + " --epochs 2 --single-device");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  expect_same_parameters(last("mpi"), last("single"), 1e-5);
#endif
}

TEST_F(RnnDpDdp, DdpErrorsAreClear) {
  // Without a launcher's environment.
  RunResult r = run_command("env -u RANK -u WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE " +
                            std::string(RNN_DP_BINARY) + " --ddp " + files("nolauncher") + " " + kSmall);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("ember-run --nproc-per-node N"), std::string::npos) << r.output;
  // A global batch that does not split over the ranks.
  r = ember_run(3, "oddbatch", kSmall + " --batch-size 64");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--batch-size 64 is the global batch"), std::string::npos) << r.output;
  // Flags that make no sense with --ddp.
  r = run_command(std::string(RNN_DP_BINARY) + " --ddp --devices cpu:0,cpu:1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--ddp"), std::string::npos) << r.output;
  r = run_command(std::string(RNN_DP_BINARY) + " --backend gloo --ddp");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("expected tcp, mpi or nccl, got 'gloo'"), std::string::npos) << r.output;
}

// Two ranks started by hand with torchrun's variables (no launcher to stop them): killing
// rank 1 in epoch 2 makes rank 0's next all_reduce fail, and rank 0 exits 1 saying so.
TEST_F(RnnDpDdp, KilledRankMakesTheOtherFailWithDistributedError) {
  SKIP_WITHOUT_WORD_LISTS();
  const int port = free_port();
  ASSERT_GT(port, 0);
  std::vector<std::string> args = {RNN_DP_BINARY, "--ddp"};
  std::istringstream words(files("killed") + " " + kLong);
  for (std::string w; words >> w;) args.push_back(w);
  std::vector<Child> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(spawn(args,
                          {"RANK=" + std::to_string(r), "WORLD_SIZE=2", "LOCAL_RANK=" + std::to_string(r),
                           "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port)},
                          dir_ / ("rank" + std::to_string(r) + ".log")));
    ASSERT_GT(ranks.back().pid, 0);
  }
  const auto epoch1 = wait_for(ranks[0].log, std::regex("epoch=1 "), std::chrono::seconds(120));
  if (!epoch1) {
    for (auto& c : ranks) wait_exit(c.pid, std::chrono::seconds(0));
    FAIL() << "rank 0 never finished epoch 1:\n" << read_file(ranks[0].log) << read_file(ranks[1].log);
  }
  ASSERT_EQ(::kill(ranks[1].pid, SIGKILL), 0);
  const auto killed = wait_exit(ranks[1].pid, std::chrono::seconds(10));
  ASSERT_TRUE(killed && WIFSIGNALED(*killed));
  const auto t0 = Clock::now();
  const auto status = wait_exit(ranks[0].pid, std::chrono::seconds(90));
  ASSERT_TRUE(status.has_value()) << "rank 0 hung after rank 1 died:\n" << read_file(ranks[0].log);
  const std::string out = read_file(ranks[0].log);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << out;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 30.0) << "noticed only at the timeout";
  EXPECT_NE(out.find("rnn_dp: error: DistributedError: "), std::string::npos) << out;
  EXPECT_NE(out.find("rank 1"), std::string::npos) << out;
  EXPECT_EQ(out.find(kLastEpoch), std::string::npos) << out;
  // The checkpoint of epoch 1 is there to resume from.
  EXPECT_TRUE(fs::exists(last("killed")));
}

// ember-run: rank 1 killed in epoch 2 is reported by rank and signal, the group restarts, and
// with --resume the new group continues from the last checkpoint. Training is deterministic,
// so it ends bit for bit where an uninterrupted job ends.
TEST_F(RnnDpDdp, EmberRunReportsTheKilledRankAndTheRestartResumes) {
  SKIP_WITHOUT_WORD_LISTS();
  std::vector<std::string> args = {EMBER_RUN_BINARY, "--nproc-per-node", "2", "--max-restarts", "1", RNN_DP_BINARY,
                                   "--ddp", "--resume"};
  std::istringstream words(files("restarted") + " " + kLong);
  for (std::string w; words >> w;) args.push_back(w);
  const auto started = rnn_dp_test::start_and_kill_rank1(args, dir_ / "ember-run.log",
                                                         std::regex(R"(\[rank 0\]: epoch=1 )"));
  if (!started) return;
  const auto& [run, pid1] = *started;
  const auto status = wait_exit(run.pid, std::chrono::seconds(240));
  const std::string out = read_file(run.log);
  ASSERT_TRUE(status.has_value()) << "ember-run did not finish:\n" << out;
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << out;
  EXPECT_NE(out.find("ember-run: rank 1 (pid " + pid1 + ") was killed by signal 9 (SIGKILL)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("ember-run: restarting the worker group (restart 1 of 1)"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 0 of 2 (local rank 0, pid "), std::string::npos) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(resumed from \S+ \(epoch (\d) done\))"))) << out;
  const int resumed_after = std::stoi(m[1].str());
  EXPECT_GE(resumed_after, 1) << out;
  EXPECT_LE(resumed_after, kLongEpochs - 1) << out;
  EXPECT_NE(out.find("[rank 0]: " + kLastEpoch), std::string::npos) << out;

  // The same job without interruption ends with the same bytes in every tensor.
  RunResult whole = ember_run(2, "whole", kLong);
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  rnn_dp_test::expect_identical_checkpoints(last("whole"), last("restarted"));
}

// Without restarts ember-run exits with the killed rank's status (128 + 9).
TEST_F(RnnDpDdp, EmberRunExitsWithTheKilledRanksStatus) {
  SKIP_WITHOUT_WORD_LISTS();
  std::vector<std::string> args = {EMBER_RUN_BINARY, "--nproc-per-node", "2", RNN_DP_BINARY, "--ddp"};
  std::istringstream words(files("norestart") + " " + kLong);
  for (std::string w; words >> w;) args.push_back(w);
  const auto started = rnn_dp_test::start_and_kill_rank1(args, dir_ / "ember-run.log",
                                                         std::regex(R"(\[rank 0\]: epoch=1 )"));
  if (!started) return;
  const auto& [run, pid1] = *started;
  const auto status = wait_exit(run.pid, std::chrono::seconds(60));
  const std::string out = read_file(run.log);
  ASSERT_TRUE(status.has_value()) << out;
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 137) << out;
  EXPECT_NE(out.find("was killed by signal 9 (SIGKILL)"), std::string::npos) << out;
  EXPECT_EQ(out.find("restarting"), std::string::npos) << out;
}

// --uneven: 402 words (--limit 67) over 4 ranks without padding are shards of 101, 101, 100 and
// 100, in batches of 10 (global 40): ranks 0 and 1 take 11 steps per epoch, ranks 2 and 3 take
// 10. DistributedDataParallel::join lets ranks 2 and 3 shadow the last step, so the job ends
// (no hang, no timeout: --timeout 60 would turn one into an error) having trained on every word
// exactly once per epoch; without --uneven DistributedSampler pads to 404 (two words twice).
TEST_F(RnnDpDdp, UnevenShardsTrainEveryWordOnceUnderJoin) {
  SKIP_WITHOUT_WORD_LISTS();
  const std::string args = "--limit 67 --batch-size 40 --threads 1 --workers 1 --progress none --epochs 2 --timeout 60";
  RunResult r = ember_run(4, "uneven", args + " --uneven");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rnn_dp: data train=402 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--uneven: shards without padding, batches per rank 11, 11, 10, 10"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("[rank 0]: epoch=2 "), std::string::npos) << r.output;
  const auto uneven = read_metrics(metrics("uneven"));
  ASSERT_EQ(uneven.size(), 2u);
  for (const auto& m : uneven) EXPECT_EQ(m["samples_seen"].get<double>(), 402.0) << m.dump();
  RunResult padded = ember_run(4, "padded", args);
  ASSERT_EQ(padded.exit_code, 0) << padded.output;
  const auto even = read_metrics(metrics("padded"));
  ASSERT_EQ(even.size(), 2u);
  EXPECT_EQ(even[0]["samples_seen"].get<double>(), 404.0) << even[0].dump();
  // Options that need every rank at the same step are refused with it.
  RunResult bad = run_command(std::string(RNN_DP_BINARY) + " --ddp --uneven --zero");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--uneven: ranks take different numbers of steps"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace rnn_dp_test
