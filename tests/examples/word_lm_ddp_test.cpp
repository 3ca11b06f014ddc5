// examples/word_lm --ddp end to end: the real binary as 2 ranks under ember-run (tcp) and under
// mpirun follows one process on the same global batch of streams (see Note [word_lm under DDP]
// in examples/word_lm/train.cpp): the same losses per epoch and the same parameters, up to float
// rounding. Dropout is off: each rank draws its own masks.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "examples/word_lm/bible_data.h"
#include "tests/examples/rnn_dp_process_util.h"
#include "tests/examples/word_lm_test_util.h"
#include "tests/examples/rnn_dp_test_util.h"

namespace {

namespace fs = std::filesystem;
using rnn_dp_test::read_metrics;
using rnn_dp_test::run_command;
using rnn_dp_test::RunResult;

const std::string kSmall =
    "--train-tokens 12000 --vocab-size 500 --emsize 24 --nhid 24 --dropout 0 --epochs 2 --batch-size 8 "
    "--eval-batch-size 4 --threads 1 --progress none";

class WordLmDdp : public rnn_dp_test::RunDirTest {
 protected:
  std::string files(const std::string& name) const {
    return "--metrics " + metrics(name).string() + " --checkpoint-dir " + (dir_ / name / "ckpt").string();
  }
  RunResult word_lm(const std::string& name, const std::string& args) const {
    return run_command(std::string(WORD_LM_BINARY) + " " + files(name) + " " + args);
  }
  void expect_follows_single(const std::string& ddp, const std::string& single) const {
    const auto a = read_metrics(metrics(ddp)), b = read_metrics(metrics(single));
    ASSERT_EQ(a.size(), 2u) << "rank 0 alone writes one line per epoch";
    ASSERT_EQ(b.size(), 2u);
    for (size_t e = 0; e < 2; ++e) {
      EXPECT_EQ(a[e]["ddp_world_size"].get<int>(), 2);
      for (const char* key : {"train_loss", "val_loss", "test_loss"}) {
        EXPECT_NEAR(a[e][key].get<double>(), b[e][key].get<double>(), 1e-5) << key << ", epoch " << e + 1;
      }
      EXPECT_EQ(a[e]["next_lr"].get<double>(), b[e]["next_lr"].get<double>()) << "epoch " << e + 1;
    }
    rnn_dp_test::expect_same_parameters(last(ddp), last(single), 1e-5);
  }
};

TEST_F(WordLmDdp, TwoRanksUnderEmberRunFollowOneProcess) {
  SKIP_WITHOUT_BIBLE();
  const RunResult s = word_lm("single", kSmall);
  ASSERT_EQ(s.exit_code, 0) << s.output;
  const RunResult r = run_command(std::string(EMBER_RUN_BINARY) + " --nproc-per-node 2 " + WORD_LM_BINARY +
                                  " --ddp " + files("ddp") + " " + kSmall);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("DistributedDataParallel over 2 ranks (tcp backend)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank 0]: epoch=2 "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[rank 1]: epoch="), std::string::npos) << "rank 0 alone reports:\n" << r.output;
  expect_follows_single("ddp", "single");
}

TEST_F(WordLmDdp, TwoRanksUnderMpirunFollowOneProcess) {
  SKIP_WITHOUT_BIBLE();
#ifndef WORD_LM_MPIRUN
  GTEST_SKIP() << "built without MPI (EMBER_HAVE_MPI off): no mpi backend to test";
#else
  const RunResult s = word_lm("single", kSmall);
  ASSERT_EQ(s.exit_code, 0) << s.output;
  const RunResult r = run_command(std::string(WORD_LM_MPIRUN) + " --allow-run-as-root --oversubscribe -np 2 " +
                                  WORD_LM_BINARY + " --ddp " + files("mpi") + " " + kSmall);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("DistributedDataParallel over 2 ranks (mpi backend)"), std::string::npos) << r.output;
  expect_follows_single("mpi", "single");
#endif
}

TEST_F(WordLmDdp, BatchThatDoesNotSplitOverTheRanksIsRefused) {
  SKIP_WITHOUT_BIBLE();
  const RunResult r = run_command(std::string(EMBER_RUN_BINARY) + " --nproc-per-node 2 " + WORD_LM_BINARY +
                                  " --ddp " + files("odd") + " " + kSmall + " --batch-size 7");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--batch-size 7"), std::string::npos) << r.output;
}

}  // namespace
