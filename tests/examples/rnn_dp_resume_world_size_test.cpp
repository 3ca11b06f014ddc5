// examples/rnn_dp --ddp --resume on another number of ranks (Note [Resume at any world size] in
// examples/rnn_dp/train.cpp): a checkpoint written by N ranks continues on M ranks, or in one
// process without --ddp, at the same global sample, and the job ends where one process training
// straight through ends (up to float rounding). Every batch is full at 1, 2 and 3 ranks: 384
// training words (--limit 64) in global batches of 48 are 8 batches of 48, 24 or 16 per rank.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tests/examples/rnn_dp_process_util.h"
#include "tests/examples/rnn_dp_test_util.h"

namespace {

using rnn_dp_test::expect_same_parameters;
using rnn_dp_test::read_metrics;
using rnn_dp_test::RunResult;

const std::string kArgs = "--limit 64 --batch-size 48 --threads 1 --workers 1 --progress none";

class RnnDpResumeWorldSize : public rnn_dp_test::RunDirTest {
 protected:
  // The single process's two epochs, to compare with.
  void run_single() {
    RunResult s = rnn_dp("single", kArgs + " --single-device --epochs 2");
    ASSERT_EQ(s.exit_code, 0) << s.output;
  }
  void expect_like_single(const std::string& name) {
    expect_same_parameters(last(name), last("single"), 1e-5);
    expect_same_parameters(last(name), last("single"), 1e-5, "optim.");  // Adam's whole state
    const auto a = read_metrics(metrics(name)), b = read_metrics(metrics("single"));
    ASSERT_FALSE(a.empty());
    ASSERT_EQ(b.size(), 2u);
    // The epoch-2 line of the resumed job: its loss sums the epoch over every run that trained it.
    EXPECT_EQ(a.back()["epoch"], 2);
    EXPECT_NEAR(a.back()["loss"].get<double>(), b[1]["loss"].get<double>(), 1e-5);
    EXPECT_NEAR(a.back()["test_acc"].get<double>(), b[1]["test_acc"].get<double>(), 1.0 / 384);
  }
};

TEST_F(RnnDpResumeWorldSize, TwoRanksForOneEpochThenThreeForTheNextFollowOneProcess) {
  SKIP_WITHOUT_WORD_LISTS();
  RunResult two = ember_run(2, "job", kArgs + " --epochs 1");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  RunResult three = ember_run(3, "job", kArgs + " --epochs 2 --resume");
  ASSERT_EQ(three.exit_code, 0) << three.output;
  EXPECT_NE(three.output.find("resumed from " + last("job").string() + " (epoch 1 done), written by 2 rank(s), now 3"),
            std::string::npos)
      << three.output;
  EXPECT_NE(three.output.find("DistributedDataParallel over 3 ranks"), std::string::npos) << three.output;
  run_single();
  expect_same_parameters(dir_ / "job" / "ckpt" / "epoch-1.safetensors",
                         dir_ / "single" / "ckpt" / "epoch-1.safetensors", 1e-5);
  expect_like_single("job");
}

// Within an epoch, through the sharded optimizer: 2 ranks stop after 11 steps (8 of epoch 1, 3
// of epoch 2: global sample 144), 3 ranks with ZeroRedundancyOptimizer load their shards of the
// consolidated Adam state and stop 3 steps later (sample 288), and one process without --ddp
// finishes epoch 2.
TEST_F(RnnDpResumeWorldSize, MidEpochCheckpointsResumeOnThreeRanksWithShardedAdamThenOnOne) {
  SKIP_WITHOUT_WORD_LISTS();
  RunResult two = ember_run(2, "job", kArgs + " --epochs 2 --max-steps 11");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("stopped after step 11 (--max-steps), at sample 144 of epoch 2"), std::string::npos)
      << two.output;
  RunResult three = ember_run(3, "job", kArgs + " --epochs 2 --resume --zero --max-steps 14");
  ASSERT_EQ(three.exit_code, 0) << three.output;
  EXPECT_NE(three.output.find("(epoch 1 done) at sample 144 of epoch 2, written by 2 rank(s), now 3"),
            std::string::npos)
      << three.output;
  EXPECT_NE(three.output.find("Adam sharded by ZeroRedundancyOptimizer"), std::string::npos) << three.output;
  EXPECT_NE(three.output.find("stopped after step 14 (--max-steps), at sample 288 of epoch 2"), std::string::npos)
      << three.output;
  RunResult one = rnn_dp("job", kArgs + " --single-device --epochs 2 --resume");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("(epoch 1 done) at sample 288 of epoch 2, written by 3 rank(s), now 1"), std::string::npos)
      << one.output;
  EXPECT_NE(one.output.find("epoch=2 "), std::string::npos) << one.output;
  run_single();
  expect_like_single("job");
}

// --checkpoint-every: 3 ranks checkpoint at steps 5, 10 and (--max-steps) 15, sample 336 of
// epoch 2; 2 ranks continue from the last.
TEST_F(RnnDpResumeWorldSize, CheckpointsEveryFiveStepsOnThreeRanksResumeOnTwo) {
  SKIP_WITHOUT_WORD_LISTS();
  RunResult r = ember_run(3, "job", kArgs + " --epochs 2 --checkpoint-every 5 --max-steps 15");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  RunResult two = ember_run(2, "job", kArgs + " --epochs 2 --resume");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("(epoch 1 done) at sample 336 of epoch 2, written by 3 rank(s), now 2"), std::string::npos)
      << two.output;
  run_single();
  expect_like_single("job");
}

TEST_F(RnnDpResumeWorldSize, ZeroWithoutDdpIsRefused) {
  RunResult r = rnn_dp_test::run_command(std::string(RNN_DP_BINARY) + " --zero");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--zero applies only with --ddp"), std::string::npos) << r.output;
}

}  // namespace
