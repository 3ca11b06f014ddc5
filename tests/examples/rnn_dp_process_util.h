// Child processes for the rnn_dp end-to-end tests: spawning with extra environment and one
// log file, waiting for a line in that log, waiting for an exit (killing on timeout), a free
// loopback port, a command line split into words; RunDirTest, a fixture giving each run its own metrics file and checkpoint
// directory under a fresh temporary directory. Used from the test's main thread.
#pragma once
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/serialization.h"
#include "tests/examples/rnn_dp_test_util.h"
#include "tests/support/free_port.h"

extern char** environ;

namespace rnn_dp_test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A process started with posix_spawn, its stdout and stderr in one log file.
struct Child {
  pid_t pid = -1;
  fs::path log;
};

inline Child spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env, const fs::path& log) {
  std::vector<std::string> env_strings = extra_env;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  Child c;
  c.log = log;
  const int rc = posix_spawn(&c.pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  EXPECT_EQ(rc, 0) << "posix_spawn " << argv[0] << ": " << std::strerror(rc);
  if (rc != 0) c.pid = -1;
  return c;
}

// Waits until the log matches `pattern` (returning the match's first group, or the whole
// match) or `timeout` passes (nullopt).
inline std::optional<std::string> wait_for(const fs::path& log, const std::regex& pattern, std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    std::smatch m;
    const std::string text = read_file(log);
    if (std::regex_search(text, m, pattern)) return m.size() > 1 ? m[1].str() : m[0].str();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

// The wait status of `pid` within `timeout`; nullopt (after killing it) when it did not end.
inline std::optional<int> wait_exit(pid_t pid, std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return std::nullopt;
}

using ember::support::free_port;

// The --ddp runs of rnn_dp_ddp_test and rnn_dp_launchers_test. 384 training words (64 per
// language): with a global batch of 64 or 48 every batch is full on every rank, which is what
// makes the ranks' averaged gradient the single process's (see Note [DDP mode]). The kill tests
// use 6000 words so that an epoch lasts long enough to kill in: they kill rank 1 once rank 0 has
// printed epoch 1. An epoch of kLong takes about 0.3 s on an idle machine, so 8 epochs leave
// rank 0 seconds of training to notice in, even when the test's own polling is slow to see the line.
inline const std::string kSmall = "--limit 64 --threads 1 --workers 1 --progress none";
inline constexpr int kLongEpochs = 8;
inline const std::string kLong = "--limit 1000 --threads 1 --workers 1 --progress none --epochs " +
                                 std::to_string(kLongEpochs) + " --timeout 60";
inline const std::string kLastEpoch = "epoch=" + std::to_string(kLongEpochs) + " ";

/// A command line split at blanks, for spawn() (no quoting).
inline std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

/// Starts a launcher (argv, output to log), waits until its rank 1 announced its pid and the
/// log matches `progress` (rank 0's first epoch line), and SIGKILLs rank 1. Returns the
/// launcher and rank 1's pid, or nullopt (launcher killed, a test failure recorded with the
/// log) when the job never got there.
inline std::optional<std::pair<Child, std::string>> start_and_kill_rank1(const std::vector<std::string>& argv,
                                                                         const fs::path& log,
                                                                         const std::regex& progress) {
  Child run = spawn(argv, {}, log);
  if (run.pid <= 0) return std::nullopt;
  const auto pid1 = wait_for(run.log, std::regex(R"(rank 1 of 2 \(local rank 1, pid (\d+)\))"),
                             std::chrono::seconds(60));
  const auto epoch1 = wait_for(run.log, progress, std::chrono::seconds(120));
  if (!pid1 || !epoch1) {
    wait_exit(run.pid, std::chrono::seconds(0));
    ADD_FAILURE() << "the job never finished epoch 1:\n" << read_file(run.log);
    return std::nullopt;
  }
  EXPECT_EQ(::kill(std::stoi(*pid1), SIGKILL), 0);
  return std::make_pair(run, *pid1);
}

/// Every tensor of two checkpoints has the same bytes.
inline void expect_identical_checkpoints(const fs::path& a_path, const fs::path& b_path) {
  auto a = ember::load_safetensors_map(a_path.string());
  auto b = ember::load_safetensors_map(b_path.string());
  ASSERT_GT(a.size(), 3u);
  ASSERT_EQ(a.size(), b.size());
  for (auto& [name, x] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    ASSERT_EQ(x.nbytes(), b.at(name).nbytes()) << name;
    EXPECT_EQ(std::memcmp(x.raw_data(), b.at(name).raw_data(), x.nbytes()), 0) << name << " differs";
  }
}

class RunDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rnn_dp_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr) << std::strerror(errno);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // The arguments every run gets: its own metrics file and checkpoint directory under dir_.
  std::string files(const std::string& name) const {
    return "--dict-dir " + std::string(kDictDir) + " --metrics " + (dir_ / name / "metrics.jsonl").string() +
           " --checkpoint-dir " + (dir_ / name / "ckpt").string();
  }
  fs::path last(const std::string& name) const { return dir_ / name / "ckpt" / "last.safetensors"; }
  fs::path metrics(const std::string& name) const { return dir_ / name / "metrics.jsonl"; }
#ifdef RNN_DP_BINARY
  RunResult rnn_dp(const std::string& name, const std::string& args) const {
    return run_command(std::string(RNN_DP_BINARY) + " " + files(name) + " " + args);
  }
#endif
#if defined(RNN_DP_BINARY) && defined(EMBER_RUN_BINARY)
  RunResult ember_run(int nproc, const std::string& name, const std::string& args) const {
    return run_command(std::string(EMBER_RUN_BINARY) + " --nproc-per-node " + std::to_string(nproc) + " " +
                       RNN_DP_BINARY + " --ddp " + files(name) + " " + args);
  }
#endif
  fs::path dir_;
};

}  // namespace rnn_dp_test
