// examples/rnn_dp --deterministic (Note [Shard steps] in examples/rnn_dp/train.cpp), with dropout
// on: the SHA-256 of the state dict (every tensor of the checkpoint: parameters, Adam's
// exp_avg, exp_avg_sq and step) after 20 steps is the same for one process with 0 or 2
// DataLoader workers and 1 or 2 intra-op threads; DataParallel over 2, 3 and 4 CPU devices (one
// device is the one-process run); DistributedDataParallel over 1, 2, 3 and 4
// ranks under ember-run (tcp) and 2 and 3 under mpirun (mpi); 3 ranks with
// ZeroRedundancyOptimizer; and a job stopped at step 7 on 3 ranks and resumed on 2; with --augment
// too. Without --deterministic the one-process and two-rank hashes differ, which is what the mode
// fixes.
// 384 training words (--limit 64) in global batches of 48 over 8 shards of 6: 8 steps an epoch.
#include <gtest/gtest.h>

#include <string>

#include "tests/examples/deterministic_state_hash.h"
#include "tests/examples/rnn_dp_process_util.h"
#include "tests/examples/rnn_dp_test_util.h"

namespace {

using rnn_dp_test::RunResult;
namespace fs = std::filesystem;

const std::string kArgs = "--limit 64 --batch-size 48 --epochs 3 --max-steps 20 --dropout 0.3 --progress none";
const std::string kDet = kArgs + " --deterministic --shards 8";

std::string state_sha256(const fs::path& checkpoint) { return deterministic_test::state_sha256(checkpoint, 8); }

class RnnDpDeterministic : public rnn_dp_test::RunDirTest {
 protected:
  std::string single(const std::string& name, const std::string& args) {
    RunResult r = rnn_dp(name, args + " --single-device");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("stopped after step 20"), std::string::npos) << r.output;
    return state_sha256(last(name));
  }
  std::string devices(int n, const std::string& args) {
    std::string list = "cpu:0";
    for (int i = 1; i < n; ++i) list += ",cpu:" + std::to_string(i);
    const std::string name = "dp" + std::to_string(n);
    RunResult r = rnn_dp(name, args + " --devices " + list);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("DataParallel over " + list), std::string::npos) << r.output;
    return state_sha256(last(name));
  }
  std::string ranks(int n, const std::string& name, const std::string& args) {
    RunResult r = ember_run(n, name, args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("DistributedDataParallel over " + std::to_string(n) + " ranks"), std::string::npos)
        << r.output;
    return state_sha256(last(name));
  }
};

TEST_F(RnnDpDeterministic, SameStateHashForEveryWorldSizeThreadCountWorkerCountAndResume) {
  SKIP_WITHOUT_WORD_LISTS();
  const std::string ref = single("one", kDet + " --workers 0 --threads 1");
  ASSERT_EQ(ref.size(), 64u);
  EXPECT_EQ(single("one_threads2_workers2", kDet + " --workers 2 --threads 2"), ref);
  for (int n : {2, 3, 4}) EXPECT_EQ(devices(n, kDet + " --workers 0 --threads 1"), ref) << "DataParallel over " << n;
  for (int n : {1, 2, 3, 4}) {
    EXPECT_EQ(ranks(n, "tcp" + std::to_string(n), kDet + " --workers 0 --threads 1"), ref) << n << " ranks (tcp)";
  }
  EXPECT_EQ(ranks(2, "tcp2_threads2_workers2", kDet + " --workers 2 --threads 2"), ref) << "2 ranks, 2 threads, 2 workers";
  EXPECT_EQ(ranks(3, "tcp3_zero", kDet + " --workers 0 --threads 1 --zero"), ref) << "3 ranks, ZeroRedundancyOptimizer";
  // Stopped at step 7 on 3 ranks, resumed on 2.
  RunResult first = ember_run(3, "resumed", kDet + " --workers 0 --threads 1 --max-steps 7");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  RunResult second = ember_run(2, "resumed", kDet + " --workers 0 --threads 1 --resume");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("at sample 336 of epoch 1, written by 3 rank(s), now 2"), std::string::npos)
      << second.output;
  EXPECT_EQ(state_sha256(last("resumed")), ref) << "3 ranks to step 7, then 2 ranks";
#ifdef RNN_DP_MPIRUN
  for (int n : {2, 3}) {
    const std::string name = "mpi" + std::to_string(n);
    RunResult r = rnn_dp_test::run_command(std::string(RNN_DP_MPIRUN) + " --allow-run-as-root --oversubscribe -np " +
                                           std::to_string(n) + " " + RNN_DP_BINARY + " --ddp --backend mpi " +
                                           files(name) + " " + kDet + " --workers 0 --threads 1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("(mpi backend)"), std::string::npos) << r.output;
    EXPECT_EQ(state_sha256(last(name)), ref) << n << " ranks (mpi)";
  }
#else
  std::printf("note: built without MPI: the mpirun runs were not made\n");
#endif
}

TEST_F(RnnDpDeterministic, WithoutTheModeTheHashDependsOnTheWorldSize) {
  SKIP_WITHOUT_WORD_LISTS();
  const std::string one = single("one", kArgs + " --workers 0 --threads 1");
  const std::string two = ranks(2, "two", kArgs + " --workers 0 --threads 1");
  EXPECT_NE(one, two) << "the default mode gave the same bits on 1 and 2 ranks: the test above proves nothing";
}

// --augment draws each word's byte drop from a stream of (seed, epoch, the word's index), so the
// augmented run too has one hash for one process with 0 or 2 workers, DataParallel and 3 ranks;
// and the augmentation changes the result (else the equalities would say nothing of it).
TEST_F(RnnDpDeterministic, AugmentationDrawsPerSampleStreams) {
  SKIP_WITHOUT_WORD_LISTS();
  const std::string aug = kDet + " --augment 0.5 --threads 1";
  const std::string ref = single("aug_one", aug + " --workers 0");
  ASSERT_EQ(ref.size(), 64u);
  EXPECT_NE(ref, single("plain_one", kDet + " --threads 1 --workers 0")) << "--augment 0.5 changed nothing";
  EXPECT_EQ(single("aug_one_workers2", aug + " --workers 2"), ref) << "2 DataLoader workers";
  EXPECT_EQ(devices(3, aug + " --workers 0"), ref) << "DataParallel over 3 devices";
  EXPECT_EQ(ranks(3, "aug_tcp3", aug + " --workers 2"), ref) << "3 ranks (tcp), 2 workers each";
}

// Mixed precision in the mode: autocast's bf16 / fp16 kernels are thread-count invariant like
// the float32 ones, and --amp fp16's GradScaler scales each shard's loss by a power of two and
// unscales the exact mean, so one hash per precision over one process, DataParallel and ranks;
// each precision changes the result.
TEST_F(RnnDpDeterministic, MixedPrecisionHasOneHashPerPrecision) {
  SKIP_WITHOUT_WORD_LISTS();
  const std::string plain = single("amp_none", kDet + " --threads 1 --workers 0");
  for (const std::string amp : {"bf16", "fp16"}) {
    const std::string args = kDet + " --amp " + amp;
    const std::string ref = single("amp_" + amp, args + " --threads 1 --workers 0");
    ASSERT_EQ(ref.size(), 64u);
    EXPECT_NE(ref, plain) << "--amp " << amp << " changed nothing";
    // No DataLoader workers here: the loader is the same at every precision (the test above
    // covers workers), and a fork while the pool or the engine threads free memory can deadlock
    // the child inside AddressSanitizer's allocator (GCC 12's takes no lock around fork).
    EXPECT_EQ(single("amp_" + amp + "_threads2", args + " --threads 2 --workers 0"), ref) << amp << ", 2 threads";
    EXPECT_EQ(devices(3, args + " --threads 1 --workers 0"), ref) << amp << ", DataParallel over 3 devices";
    EXPECT_EQ(ranks(3, "amp_" + amp + "_tcp3", args + " --threads 1 --workers 0"), ref) << amp << ", 3 ranks (tcp)";
  }
}

TEST_F(RnnDpDeterministic, BadOptionsAreRefused) {
  rnn_dp_test::expect_refused(RNN_DP_BINARY, {
      {"--deterministic --batch-size 50 --shards 8", "must be a multiple of --shards 8"},
      {"--ddp --deterministic --uneven", "--deterministic: --uneven (per-rank batches"},
      {"--dropout 1", "--dropout: expected a probability in [0, 1), got 1"}});
}

}  // namespace
