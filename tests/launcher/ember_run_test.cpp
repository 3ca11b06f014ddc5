// ember-run end to end: the built launcher runs launcher_test_worker (paths come from
// compile definitions) on loopback. Checks the environment, the output prefixes, failure
// reports and exit codes, that stopped workers are really gone, restarts with a fresh
// store, and signal forwarding. Only generous timeouts, to turn a hang into a failure.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "core/cpu_affinity.h"
#include "core/error.h"
#include "launcher/cgroup.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kEmberRun = EMBER_RUN_PATH;
const std::string kWorker = EMBER_LAUNCHER_TEST_WORKER;

struct Outcome {
  bool exited = false;  // false: killed by a signal (or by us, after a hang)
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class EmberRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ember_run_test_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Runs ember-run with args; `during` runs in the test while ember-run is running.
  Outcome run(const std::vector<std::string>& args, const std::map<std::string, std::string>& extra_env = {},
          const std::function<void(pid_t)>& during = {}) {
    const std::string out_path = dir_ + "/ember_run.out", err_path = dir_ + "/ember_run.err";
    pid_t pid = ::fork();
    if (pid == 0) {
      FILE* o = std::freopen(out_path.c_str(), "w", stdout);
      FILE* e = std::freopen(err_path.c_str(), "w", stderr);
      if (!o || !e) ::_exit(120);
      ::unsetenv("EMBER_STORE_TOKEN");
      for (const auto& [k, v] : extra_env) ::setenv(k.c_str(), v.c_str(), 1);
      std::vector<char*> argv{const_cast<char*>(kEmberRun.c_str())};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(kEmberRun.c_str(), argv.data());
      ::_exit(121);
    }
    if (during) during(pid);
    Outcome r;
    int status = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        ADD_FAILURE() << "ember-run did not finish within 60 s";
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    r.exited = WIFEXITED(status);
    r.code = r.exited ? WEXITSTATUS(status) : -1;
    r.out = slurp(out_path);
    r.err = slurp(err_path);
    return r;
  }

  std::vector<std::string> worker(std::initializer_list<std::string> args) const {
    std::vector<std::string> v{kWorker};
    v.insert(v.end(), args);
    return v;
  }
  static std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  pid_t read_pid(const std::string& name) const { return std::stoi(slurp(dir_ + "/" + name)); }

  // Gone: no such process, or only a zombie left for init to reap.
  static bool gone(pid_t pid, int timeout_ms = 2000) {
    for (int i = 0; i < timeout_ms / 10; ++i) {
      if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
      std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
      std::string line;
      std::getline(stat, line);
      auto close_paren = line.rfind(')');
      if (close_paren != std::string::npos && close_paren + 2 < line.size() && line[close_paren + 2] == 'Z')
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  void wait_for_files(const std::string& stem, int n) const {
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    for (int r = 0; r < n; ++r)
      while (!fs::exists(dir_ + "/" + stem + std::to_string(r)) && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  std::string dir_;
};

std::string Diagnose(const Outcome& r) { return "exit " + std::to_string(r.code) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err; }

TEST_F(EmberRunTest, SetsTheEnvironmentForEachRankAndPrefixesOutput) {
  Outcome r = run(cat({"--nproc-per-node", "3"}, worker({"env"})));
  ASSERT_TRUE(r.exited && r.code == 0) << Diagnose(r);
  std::set<std::string> ports;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string R = std::to_string(rank);
    std::regex line("\\[rank " + R + "\\]: ENV RANK=" + R + " WORLD_SIZE=3 LOCAL_RANK=" + R +
                    " LOCAL_WORLD_SIZE=3 GROUP_RANK=0 MASTER_ADDR=127\\.0\\.0\\.1 MASTER_PORT=([0-9]+) "
                    "RESTART=0 TORCHELASTIC_RESTART=0 TOKEN_LEN=64 AGENT_STORE=True/1\n");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.out, m, line)) << "rank " << rank << "\n" << Diagnose(r);
    ports.insert(m[1]);
    EXPECT_NE(r.out.find("[rank " + R + "]: second line\n"), std::string::npos) << Diagnose(r);
    EXPECT_NE(r.out.find("[rank " + R + "]: no newline at end\n"), std::string::npos) << Diagnose(r);
    EXPECT_NE(r.err.find("[rank " + R + "]: to stderr\n"), std::string::npos) << Diagnose(r);
  }
  EXPECT_EQ(ports.size(), 1u);
  EXPECT_NE(*ports.begin(), "0");
  // Every line of the workers' output carries a prefix.
  std::istringstream lines(r.out);
  for (std::string l; std::getline(lines, l);) EXPECT_EQ(l.rfind("[rank ", 0), 0u) << l;
}

// --cpu-bind auto (the default) gives each local rank its own block of the CPUs ember-run may
// use; with more ranks than CPUs, or --cpu-bind none, every worker keeps them all.
TEST_F(EmberRunTest, BindsEachLocalRankToItsOwnCpus) {
  const std::vector<int> cpus = ember::allowed_cpus();
  const std::string all = ember::cpu_list_string(cpus);
  for (int nproc : {1, 2, 3}) {
    for (const char* bind : {"auto", "none"}) {
      SCOPED_TRACE(std::to_string(nproc) + " ranks, --cpu-bind " + bind);
      Outcome r = run(cat({"--nproc-per-node", std::to_string(nproc), "--cpu-bind", bind}, worker({"affinity"})));
      ASSERT_TRUE(r.exited && r.code == 0) << Diagnose(r);
      std::set<int> seen;
      for (int rank = 0; rank < nproc; ++rank) {
        const std::vector<int> block = ember::cpu_block(cpus, rank, nproc);
        const bool bound = std::string(bind) == "auto" && !block.empty();
        const std::string expected = bound ? ember::cpu_list_string(block) : all;
        const std::string R = std::to_string(rank);
        EXPECT_NE(r.out.find("[rank " + R + "]: AFFINITY RANK=" + R + " CPUS=" + expected + "\n"), std::string::npos)
            << "expected CPUs " << expected << "\n" << Diagnose(r);
        if (bound) {
          for (int c : block) EXPECT_TRUE(seen.insert(c).second) << "CPU " << c << " given to two ranks";
        }
      }
    }
  }
}

TEST(CpuBlock, SplitsTheCpusIntoDisjointBlocks) {
  const std::vector<int> cpus{0, 1, 2, 3, 4, 6, 7};
  EXPECT_EQ(ember::cpu_block(cpus, 0, 3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(ember::cpu_block(cpus, 1, 3), (std::vector<int>{3, 4}));
  EXPECT_EQ(ember::cpu_block(cpus, 2, 3), (std::vector<int>{6, 7}));
  EXPECT_EQ(ember::cpu_block(cpus, 0, 1), cpus);
  EXPECT_TRUE(ember::cpu_block({0, 1}, 2, 3).empty());
  EXPECT_THROW(ember::cpu_block(cpus, 3, 3), ember::ValueError);
  EXPECT_EQ(ember::cpu_list_string(cpus), "0-4,6-7");
  EXPECT_EQ(ember::cpu_list_string({5}), "5");
}

TEST_F(EmberRunTest, LaterNodesOffsetRanksByNodeRank) {
  // Node 1 of 2 hosts no store; its workers get ranks 2 and 3 of 4.
  Outcome r = run(cat({"--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "2", "--master-addr",
                   "127.0.0.1", "--master-port", "29555"},
                  worker({"env"})),
              {{"EMBER_STORE_TOKEN", "shared-secret"}});
  ASSERT_TRUE(r.exited && r.code == 0) << Diagnose(r);
  for (int local = 0; local < 2; ++local) {
    const std::string R = std::to_string(2 + local), L = std::to_string(local);
    EXPECT_NE(r.out.find("[rank " + R + "]: ENV RANK=" + R + " WORLD_SIZE=4 LOCAL_RANK=" + L +
                         " LOCAL_WORLD_SIZE=2 GROUP_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 "
                         "RESTART=0 TORCHELASTIC_RESTART=0 TOKEN_LEN=13 AGENT_STORE=True/1\n"),
              std::string::npos)
        << Diagnose(r);
  }
}

TEST_F(EmberRunTest, WorkersRendezvousThroughTheHostedStore) {
  Outcome r = run(cat({"--nproc-per-node", "4"}, worker({"store"})));
  ASSERT_TRUE(r.exited && r.code == 0) << Diagnose(r);
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_NE(r.out.find("[rank " + std::to_string(rank) + "]: STORE OK rank " + std::to_string(rank) + " sum 6\n"),
              std::string::npos)
        << Diagnose(r);
}

TEST_F(EmberRunTest, FailingWorkersExitCodeBecomesEmberRunsAndTheOthersAreStopped) {
  Outcome r = run(cat({"--nproc-per-node", "3"}, worker({"fail", "1", "exit:3", dir_})));
  ASSERT_TRUE(r.exited) << Diagnose(r);
  EXPECT_EQ(r.code, 3) << Diagnose(r);
  const pid_t failed = read_pid("pid_1");
  EXPECT_NE(r.err.find("ember-run: rank 1 (pid " + std::to_string(failed) + ") exited with code 3"),
            std::string::npos)
      << Diagnose(r);
  EXPECT_NE(r.out.find("[rank 1]: rank 1 failing now"), std::string::npos) << Diagnose(r);
  for (int rank = 0; rank < 3; ++rank) EXPECT_TRUE(gone(read_pid("pid_" + std::to_string(rank)))) << rank;
}

TEST_F(EmberRunTest, WorkerKilledBySignalIsReportedWithTheSignal) {
  Outcome r = run(cat({"--nproc-per-node", "3"}, worker({"fail", "2", "sigkill", dir_})));
  ASSERT_TRUE(r.exited) << Diagnose(r);
  EXPECT_EQ(r.code, 128 + SIGKILL) << Diagnose(r);
  const pid_t failed = read_pid("pid_2");
  EXPECT_NE(r.err.find("ember-run: rank 2 (pid " + std::to_string(failed) + ") was killed by signal 9 (SIGKILL)"),
            std::string::npos)
      << Diagnose(r);
  for (int rank = 0; rank < 3; ++rank) EXPECT_TRUE(gone(read_pid("pid_" + std::to_string(rank)))) << rank;
}

// Regression: rnn_dp_ddp_test's killed rank was reported as "rank 0 exited with code 1" on a busy
// machine, because rank 0 noticed the broken connection and exited before the SIGKILLed rank
// could be reaped. See Note [Which failure is reported] in launcher/worker_group.cpp.
TEST_F(EmberRunTest, SignalDeathReapedJustAfterAPeersExitCodeIsTheOneReported) {
  Outcome r = run(cat({"--nproc-per-node", "3"}, worker({"exit-then-sigkill", dir_})));
  ASSERT_TRUE(r.exited) << Diagnose(r);
  EXPECT_EQ(r.code, 128 + SIGKILL) << Diagnose(r);
  const pid_t killed = read_pid("pid_1");
  EXPECT_NE(r.err.find("ember-run: rank 1 (pid " + std::to_string(killed) + ") was killed by signal 9 (SIGKILL)"),
            std::string::npos)
      << Diagnose(r);
  for (int rank = 0; rank < 3; ++rank) EXPECT_TRUE(gone(read_pid("pid_" + std::to_string(rank)))) << rank;
}

TEST_F(EmberRunTest, MaxRestartsRestartsTheGroupWithAFreshStore) {
  Outcome r = run(cat({"--nproc-per-node", "3", "--max-restarts", "1"}, worker({"fail-first", "1", "4"})));
  ASSERT_TRUE(r.exited && r.code == 0) << Diagnose(r);
  EXPECT_NE(r.err.find("rank 1 (pid "), std::string::npos) << Diagnose(r);
  EXPECT_NE(r.err.find("restarting the worker group (restart 1 of 1)"), std::string::npos) << Diagnose(r);
  EXPECT_EQ(r.out.find("STALE"), std::string::npos) << Diagnose(r);
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_NE(r.out.find("RECOVERED rank " + std::to_string(rank) + " attempt 1"), std::string::npos) << Diagnose(r);
}

TEST_F(EmberRunTest, WithoutRestartsTheFirstFailureIsFinal) {
  Outcome r = run(cat({"--nproc-per-node", "2"}, worker({"fail-first", "1", "4"})));
  ASSERT_TRUE(r.exited) << Diagnose(r);
  EXPECT_EQ(r.code, 4) << Diagnose(r);
  EXPECT_EQ(r.out.find("RECOVERED"), std::string::npos) << Diagnose(r);
}

TEST_F(EmberRunTest, RestartsRunOutAndTheLastFailureCodeIsReturned) {
  Outcome r = run(cat({"--nproc-per-node", "2", "--max-restarts", "2"}, worker({"fail", "0", "exit:5", dir_})));
  ASSERT_TRUE(r.exited) << Diagnose(r);
  EXPECT_EQ(r.code, 5) << Diagnose(r);
  EXPECT_NE(r.err.find("restart 2 of 2"), std::string::npos) << Diagnose(r);
  EXPECT_NE(r.err.find("giving up after 2 restarts"), std::string::npos) << Diagnose(r);
}

TEST_F(EmberRunTest, SigtermToEmberRunReachesEveryWorker) {
  Outcome r = run(cat({"--nproc-per-node", "3"}, worker({"trap", dir_})), {}, [&](pid_t ember_run) {
    wait_for_files("ready_", 3);
    ::kill(ember_run, SIGTERM);
  });
  ASSERT_TRUE(r.exited) << Diagnose(r);
  EXPECT_EQ(r.code, 128 + SIGTERM) << Diagnose(r);
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_EQ(slurp(dir_ + "/signal_" + std::to_string(rank)), std::to_string(SIGTERM) + "\n") << rank;
}

TEST_F(EmberRunTest, SigintToEmberRunReachesEveryWorker) {
  Outcome r = run(cat({"--nproc-per-node", "2"}, worker({"trap", dir_})), {}, [&](pid_t ember_run) {
    wait_for_files("ready_", 2);
    ::kill(ember_run, SIGINT);
  });
  ASSERT_TRUE(r.exited) << Diagnose(r);
  EXPECT_EQ(r.code, 128 + SIGINT) << Diagnose(r);
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_EQ(slurp(dir_ + "/signal_" + std::to_string(rank)), "02\n") << rank;
}

TEST_F(EmberRunTest, WorkersIgnoringSigtermAreKilledAfterTheGracePeriod) {
  Outcome r = run(cat({"--nproc-per-node", "3", "--stop-timeout-ms", "300"}, worker({"ignore-term", "0", dir_})));
  ASSERT_TRUE(r.exited) << Diagnose(r);
  EXPECT_EQ(r.code, 1) << Diagnose(r);
  for (int rank = 0; rank < 3; ++rank) EXPECT_TRUE(gone(read_pid("pid_" + std::to_string(rank)))) << rank;
}

TEST_F(EmberRunTest, ChildrenOfStoppedWorkersAreStoppedToo) {
  Outcome r = run(cat({"--nproc-per-node", "2"}, worker({"grandchild", "1", dir_})));
  ASSERT_TRUE(r.exited) << Diagnose(r);
  EXPECT_EQ(r.code, 2) << Diagnose(r);
  for (int rank = 0; rank < 2; ++rank) EXPECT_TRUE(gone(read_pid("child_" + std::to_string(rank)))) << rank;
}

// Issue 19, 6(b): SIGKILLing ember-run took its workers down (parent-death signal), but the
// workers' own children ran on under PID 1. The guardian sweeps their process groups.
TEST_F(EmberRunTest, ChildrenOfWorkersDieWhenEmberRunIsSigkilled) {
  Outcome r = run(cat({"--nproc-per-node", "2"}, worker({"grandchild", "-1", dir_})), {}, [&](pid_t ember_run) {
    wait_for_files("child_", 2);
    ::kill(ember_run, SIGKILL);
  });
  ASSERT_FALSE(r.exited) << Diagnose(r);
  // Generous bound: it only turns "never" into a failure.
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_TRUE(gone(read_pid("child_" + std::to_string(rank)), 20'000)) << "grandchild of rank " << rank;
}

// Where ember-run may make cgroups (Note [Rank cgroups]), what a worker started dies with
// ember-run even after leaving the worker's process group with setsid(); elsewhere ember-run
// says once at start-up that it cannot promise that.
bool rank_cgroups_available() {
  ember::launcher::RankCgroups probe;
  return probe.available();
}

TEST_F(EmberRunTest, SetsidGrandchildrenDieWhenEmberRunIsSigkilled) {
  Outcome r = run(cat({"--nproc-per-node", "2"}, worker({"setsid-grandchild", dir_})), {}, [&](pid_t ember_run) {
    wait_for_files("child_", 2);
    ::kill(ember_run, SIGKILL);
  });
  ASSERT_FALSE(r.exited) << Diagnose(r);
  if (!rank_cgroups_available()) {
    for (int rank = 0; rank < 2; ++rank) ::kill(read_pid("child_" + std::to_string(rank)), SIGKILL);
    GTEST_SKIP() << "cgroup v2 is not writable here: " << ember::launcher::RankCgroups().why_not();
  }
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_TRUE(gone(read_pid("child_" + std::to_string(rank)), 20'000)) << "setsid grandchild of rank " << rank;
}

TEST_F(EmberRunTest, SetsidGrandchildrenOfAStoppedGroupAreStopped) {
  Outcome r = run(cat({"--nproc-per-node", "2"}, worker({"setsid-grandchild", dir_})), {}, [&](pid_t ember_run) {
    wait_for_files("child_", 2);
    ::kill(ember_run, SIGTERM);
  });
  ASSERT_TRUE(r.exited) << Diagnose(r);
  const bool cgroups = rank_cgroups_available();
  const size_t said = r.err.find("ranks run without cgroups");
  if (!cgroups) {
    EXPECT_NE(said, std::string::npos) << Diagnose(r);
    EXPECT_EQ(r.err.find("ranks run without cgroups", said + 1), std::string::npos) << "said more than once";
    for (int rank = 0; rank < 2; ++rank) ::kill(read_pid("child_" + std::to_string(rank)), SIGKILL);
    GTEST_SKIP() << "cgroup v2 is not writable here";
  }
  EXPECT_EQ(said, std::string::npos) << Diagnose(r);
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_TRUE(gone(read_pid("child_" + std::to_string(rank)), 20'000)) << "setsid grandchild of rank " << rank;
}

// A worker that succeeds but leaves a child running: the job is over when ember-run returns.
TEST_F(EmberRunTest, ChildrenOfSucceededWorkersEndWithTheJob) {
  Outcome r = run(cat({"--nproc-per-node", "2"}, worker({"daemon", dir_})));
  ASSERT_TRUE(r.exited && r.code == 0) << Diagnose(r);
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_TRUE(gone(read_pid("child_" + std::to_string(rank)), 20'000)) << "child of rank " << rank;
}

TEST_F(EmberRunTest, LogDirGetsOneFilePerRank) {
  const std::string logs = dir_ + "/logs/nested";
  Outcome r = run(cat({"--nproc-per-node", "2", "--log-dir", logs}, worker({"env"})));
  ASSERT_TRUE(r.exited && r.code == 0) << Diagnose(r);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log = slurp(logs + "/rank_" + std::to_string(rank) + ".log");
    EXPECT_EQ(log.rfind("ENV RANK=" + std::to_string(rank) + " ", 0), 0u) << log;
    EXPECT_NE(log.find("to stderr\n"), std::string::npos) << log;
    EXPECT_EQ(log.find("[rank"), std::string::npos) << log;  // the log is the worker's own text
  }
}

TEST_F(EmberRunTest, UsageErrorsExitWithCode2) {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"--nproc-per-node", "two", kWorker},
      {"--nproc-per-node", "0", kWorker},
      {"--nproc-per-node"},
      {"--no-such-flag", "1", kWorker},
      {"--nnodes", "2", kWorker},  // no --master-port
      {"--nnodes", "2", "--node-rank", "2", "--master-port", "1234", kWorker},
      {"--master-port", "70000", kWorker},
  };
  for (const auto& args : bad) {
    Outcome r = run(args);
    EXPECT_TRUE(r.exited && r.code == 2) << Diagnose(r);
    EXPECT_NE(r.err.find("usage: ember-run"), std::string::npos) << Diagnose(r);
  }
  Outcome multi = run(cat({"--nnodes", "2", "--master-port", "1234"}, worker({"env"})));
  EXPECT_EQ(multi.code, 2) << Diagnose(multi);  // no shared EMBER_STORE_TOKEN
  Outcome help = run({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("usage: ember-run"), std::string::npos);
}

TEST_F(EmberRunTest, AMissingProgramExitsWith127) {
  Outcome r = run({"--nproc-per-node", "2", dir_ + "/does_not_exist"});
  EXPECT_TRUE(r.exited && r.code == 127) << Diagnose(r);
  EXPECT_NE(r.err.find("cannot execute"), std::string::npos) << Diagnose(r);
}

}  // namespace
