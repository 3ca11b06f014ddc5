// torchrun from today's PyTorch (the peer environment of scripts/setup_peers.sh: its agent hosts
// the 2.x libuv TCPStore, which the ranks' TorchTCPStore speaks) starts `rnn_dp --ddp` and
// `word_lm --ddp` with 2 ranks, for real: rnn_dp's ranks end where one process with the whole
// batch ends (within 1e-5), and word_lm --deterministic reaches the one-process state hash bit for
// bit. Debian's torchrun (1.13) is rnn_dp_launchers_test's. Skips, saying why, without the peer
// environment ($EMBER_PEERS_VENV, default <source>/.venv-peers).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/examples/deterministic_state_hash.h"
#include "tests/examples/rnn_dp_process_util.h"
#include "tests/examples/rnn_dp_test_util.h"
#include "tests/examples/word_lm_test_util.h"

namespace {

namespace fs = std::filesystem;
using rnn_dp_test::expect_same_parameters;
using rnn_dp_test::free_port;
using rnn_dp_test::run_command;
using rnn_dp_test::RunResult;

// The peer environment's torchrun command line prefix (python -m torch.distributed.run), or
// empty with *why set.
std::string todays_torchrun(std::string* why, std::string* version) {
  const char* venv = std::getenv("EMBER_PEERS_VENV");
  const std::string python = std::string(venv != nullptr && *venv != '\0' ? venv : EMBER_PEERS_VENV_FALLBACK) +
                             "/bin/python";
  if (!fs::exists(python)) {
    *why = python + " does not exist (scripts/setup_peers.sh makes the peer environment)";
    return "";
  }
  RunResult v = run_command(python + " -c 'import torch, torch.distributed.run; print(\"torch\", torch.__version__)'");
  const size_t at = v.output.find("torch ");
  if (v.exit_code != 0 || at == std::string::npos) {
    *why = python + " cannot import torch.distributed.run: " + v.output;
    return "";
  }
  *version = v.output.substr(at + 6, v.output.find_first_of(" \n", at + 6) - (at + 6));
  return python + " -m torch.distributed.run --nproc_per_node 2 --monitor_interval 0.2 --master_addr 127.0.0.1"
                  " --master_port " +
         std::to_string(free_port()) + " --no_python ";
}

#define SKIP_WITHOUT_TODAYS_TORCHRUN(var)                                           \
  std::string why_no_torchrun, torch_version;                                       \
  const std::string var = todays_torchrun(&why_no_torchrun, &torch_version);        \
  if (var.empty()) GTEST_SKIP() << why_no_torchrun;                                 \
  std::printf("torchrun of torch %s\n", torch_version.c_str())

class TorchrunPeer : public rnn_dp_test::RunDirTest {};

TEST_F(TorchrunPeer, StartsRnnDpDdpAndItsRanksFollowTheSingleProcess) {
  SKIP_WITHOUT_WORD_LISTS();
  SKIP_WITHOUT_TODAYS_TORCHRUN(torchrun);
  const std::string args = "--limit 64 --threads 1 --workers 1 --progress none --epochs 2 --batch-size 64";
  RunResult r = run_command(torchrun + RNN_DP_BINARY + " --ddp " + files("torchrun") + " " + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_NE(r.output.find("rnn_dp: rank " + std::to_string(rank) + " of 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("DistributedDataParallel over 2 ranks (tcp backend)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("epoch=2 "), std::string::npos) << r.output;
  RunResult s = rnn_dp("single", args + " --single-device");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  expect_same_parameters(last("torchrun"), last("single"), 1e-5);
}

TEST_F(TorchrunPeer, StartsWordLmDdpAndReachesTheOneProcessStateHash) {
  SKIP_WITHOUT_BIBLE();
  SKIP_WITHOUT_TODAYS_TORCHRUN(torchrun);
  const std::string args =
      "--train-tokens 1000 --vocab-size 500 --emsize 24 --nhid 24 --dropout 0.3 --epochs 3 --batch-size 12 "
      "--eval-batch-size 4 --bptt 10 --progress none --deterministic --shards 6 --max-steps 20 --threads 1";
  const auto files = [&](const std::string& name) {
    return "--metrics " + metrics(name).string() + " --checkpoint-dir " + (dir_ / name / "ckpt").string();
  };
  RunResult one = run_command(std::string(WORD_LM_BINARY) + " " + files("one") + " " + args);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  RunResult r = run_command(torchrun + WORD_LM_BINARY + " --ddp " + files("torchrun") + " " + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("DistributedDataParallel over 2 ranks"), std::string::npos) << r.output;
  const std::string ref = deterministic_test::state_sha256(last("one"), 8);
  ASSERT_EQ(ref.size(), 64u);
  EXPECT_EQ(deterministic_test::state_sha256(last("torchrun"), 8), ref);
}

}  // namespace
