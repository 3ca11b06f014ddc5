// examples/rnn_dp --ddp started by the launchers clusters run, for real: Debian's torchrun
// (torch 1.13; its agent hosts a PyTorch TCPStore and the ranks speak that store's protocol)
// with 2 and 3 processes, and with --max_restarts 1 after a killed rank (the restart resumes
// from the checkpoint and ends bit for bit where an uninterrupted run ends); Slurm's srun on a
// one-node Slurm the test starts itself; two ember-run "nodes" on loopback addresses; mpirun
// with a hostfile of two loopback "hosts". Each skips, saying why, where its launcher cannot
// run here.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/serialization.h"
#include "tests/examples/rnn_dp_process_util.h"
#include "tests/examples/rnn_dp_test_util.h"

// Inside rnn_dp_test: its helpers and the --ddp arguments (kSmall, kLong) need no qualification.
namespace rnn_dp_test {
namespace {

// Every one of the `world` ranks announced itself, and they trained over the tcp backend.
void expect_tcp_ranks(const std::string& output, int world) {
  for (int rank = 0; rank < world; ++rank)
    EXPECT_NE(output.find("rnn_dp: rank " + std::to_string(rank) + " of " + std::to_string(world)), std::string::npos)
        << output;
  EXPECT_NE(output.find("DistributedDataParallel over " + std::to_string(world) + " ranks (tcp backend)"),
            std::string::npos)
      << output;
}

std::string source_dir() {
  const char* s = std::getenv("EMBER_SOURCE_DIR");
  return s != nullptr ? s : EMBER_SOURCE_DIR_FALLBACK;
}

// The torchrun command line prefix, or empty with *why set where torchrun cannot run.
std::string torchrun(std::string* why) {
  const char* py = std::getenv("EMBER_TORCH_PYTHON");
  const std::string python = py != nullptr ? py : "/usr/bin/python3";
  if (run_command(python + " -c 'import torch.distributed.run'").exit_code != 0) {
    *why = python + " has no torch.distributed.run (Debian's python3-torch; scripts/setup.sh installs it)";
    return "";
  }
  // tests/support/torchrun.py is torchrun with Debian's 1.13 --redirects/--tee parser fixed.
  return python + " " + source_dir() + "/tests/support/torchrun.py";
}

#define SKIP_WITHOUT_TORCHRUN(var)     \
  std::string why_no_torchrun;         \
  const std::string var = torchrun(&why_no_torchrun); \
  if (var.empty()) GTEST_SKIP() << why_no_torchrun

class RnnDpLaunchers : public rnn_dp_test::RunDirTest {};

// ---- torchrun ----------------------------------------------------------------------------

TEST_F(RnnDpLaunchers, TorchrunTwoAndThreeRanksFollowTheSingleProcess) {
  SKIP_WITHOUT_WORD_LISTS();
  SKIP_WITHOUT_TORCHRUN(cmd);
  for (int world : {2, 3}) {
    SCOPED_TRACE("world " + std::to_string(world));
    const std::string batch = world == 2 ? "--batch-size 64" : "--batch-size 48";
    const std::string name = "torchrun" + std::to_string(world);
    // --monitor_interval 0.2: the agent sees the workers end sooner than at its 5 s default tick.
    RunResult r = run_command(cmd + " --nproc_per_node " + std::to_string(world) + " --monitor_interval 0.2" +
                              " --master_addr 127.0.0.1 --master_port " + std::to_string(free_port()) +
                              " --no_python " + RNN_DP_BINARY + " --ddp " + files(name) + " " + kSmall +
                              " --epochs 2 " + batch);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    expect_tcp_ranks(r.output, world);
    EXPECT_NE(r.output.find("epoch=2 "), std::string::npos) << r.output;
    RunResult s = rnn_dp("single" + std::to_string(world), kSmall + " --epochs 2 --single-device " + batch);
    ASSERT_EQ(s.exit_code, 0) << s.output;
    expect_same_parameters(last(name), last("single" + std::to_string(world)), 1e-5);
  }
}

// torchrun --max_restarts 1: rank 1 killed in epoch 2; rank 0 fails or is stopped (below), the
// agent restarts both (TORCHELASTIC_RESTART_COUNT=1: the new round's keys are new keys in the
// agent's store) and --resume continues from the last checkpoint, ending bit for bit where an
// uninterrupted ember-run job ends. --monitor_interval 0.2 only makes the agent notice sooner
// than its 5 s default.
TEST_F(RnnDpLaunchers, TorchrunRestartsAfterAKilledRankAndResumesFromTheCheckpoint) {
  SKIP_WITHOUT_WORD_LISTS();
  SKIP_WITHOUT_TORCHRUN(cmd);
  std::vector<std::string> args = words(cmd + " --nproc_per_node 2 --max_restarts 1 --monitor_interval 0.2 "
                                        "--master_addr 127.0.0.1 --master_port " + std::to_string(free_port()) +
                                        " --no_python " + RNN_DP_BINARY + " --ddp --resume " + files("restarted") +
                                        " " + kLong);
  const auto started = rnn_dp_test::start_and_kill_rank1(args, dir_ / "torchrun.log", std::regex("epoch=1 "));
  if (!started) return;
  const Child& run = started->first;
  const auto status = wait_exit(run.pid, std::chrono::seconds(240));
  const std::string out = read_file(run.log);
  ASSERT_TRUE(status.has_value()) << "torchrun did not finish:\n" << out;
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << out;
  // Rank 0 ends one of two ways, both correct: it notices the lost peer first and fails with a
  // DistributedError, or torchrun's agent, which polls every 0.2 s, sees rank 1's exit first and
  // stops rank 0 with SIGTERM ("Sending process <pid> closing signal SIGTERM") before its
  // collective fails. Which one wins is timing (a loaded machine flips it); either way the
  // agent restarts both ranks, which is what the rest of this test checks.
  const bool rank0_failed = out.find("rnn_dp: error: DistributedError: ") != std::string::npos;
  const bool rank0_stopped = std::regex_search(out, std::regex(R"(Sending process \d+ closing signal SIGTERM)"));
  EXPECT_TRUE(rank0_failed || rank0_stopped) << out;
  EXPECT_NE(out.find("rank 0 of 2 (local rank 0, pid "), std::string::npos) << out;
  EXPECT_NE(out.find("tcp backend, restart 1"), std::string::npos) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(resumed from \S+ \(epoch (\d) done\))"))) << out;
  EXPECT_GE(std::stoi(m[1].str()), 1) << out;
  EXPECT_NE(out.find(kLastEpoch), std::string::npos) << out;

  RunResult whole = ember_run(2, "whole", kLong);
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  rnn_dp_test::expect_identical_checkpoints(last("whole"), last("restarted"));
}

// ---- srun ---------------------------------------------------------------------------------

// A one-node Slurm for this test alone: slurmctld and slurmd (Debian's slurm-wlm) as this
// machine's host name on loopback, with a slurm.conf, state and logs in a temporary directory
// and free ports. auth/none and cred/none: nothing outside the directory (no munge key or
// daemon) is needed, which is enough for one host that trusts itself. CPUs=4 with
// config_overrides and OverSubscribe lets `srun -n 3` run on a 2-core CI machine.
class LocalSlurm {
 public:
  explicit LocalSlurm(const fs::path& dir) : dir_(dir) {
    for (const char* tool : {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/srun", "/usr/bin/sinfo"}) {
      if (::access(tool, X_OK) != 0) {
        why_not_ = std::string(tool) + " is not installed (Debian's slurmctld, slurmd, slurm-client)";
        return;
      }
    }
    if (::geteuid() != 0) {
      why_not_ = "slurmd must run as root to start job steps, and this test runs as uid " + std::to_string(::geteuid());
      return;
    }
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    std::string h = host;
    h = h.substr(0, h.find('.'));
    fs::create_directories(dir_ / "state");
    fs::create_directories(dir_ / "spool");
    std::ofstream conf(dir_ / "slurm.conf");
    const std::string d = dir_.string();
    conf << "ClusterName=embertest\nSlurmctldHost=" << h << "(127.0.0.1)\nSlurmctldPort=" << free_port()
         << "\nSlurmdPort=" << free_port()
         << "\nAuthType=auth/none\nCredType=cred/none\nSlurmUser=root\nSlurmdUser=root\n"
         << "StateSaveLocation=" << d << "/state\nSlurmdSpoolDir=" << d << "/spool\n"
         << "SlurmctldPidFile=" << d << "/slurmctld.pid\nSlurmdPidFile=" << d << "/slurmd.pid\n"
         << "SlurmctldLogFile=" << d << "/slurmctld.log\nSlurmdLogFile=" << d << "/slurmd.log\n"
         << "ProctrackType=proctrack/pgid\nTaskPlugin=task/none\nSelectType=select/cons_tres\n"
         << "SelectTypeParameters=CR_CPU\nSlurmdParameters=config_overrides\nReturnToService=2\n"
         << "MpiDefault=none\nSwitchType=switch/none\nJobAcctGatherType=jobacct_gather/none\n"
         << "AccountingStorageType=accounting_storage/none\n"
         << "NodeName=" << h << " NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN\n"
         << "PartitionName=debug Nodes=" << h << " Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE\n";
    conf.close();
    env_ = "SLURM_CONF=" + (dir_ / "slurm.conf").string();
    ctld_ = spawn({"/usr/sbin/slurmctld", "-D", "-i"}, {env_}, dir_ / "slurmctld.out");
    slurmd_ = spawn({"/usr/sbin/slurmd", "-D"}, {env_}, dir_ / "slurmd.out");
    for (int i = 0; i < 100; ++i) {  // up to 20 s for the node to report in
      if (run_command(env_ + " /usr/bin/sinfo -h -o %t").output.find("idle") != std::string::npos) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    why_not_ = "the local Slurm did not come up within 20 s: " + run_command(env_ + " /usr/bin/sinfo").output +
               read_file(dir_ / "slurmctld.log") + read_file(dir_ / "slurmd.log");
  }
  ~LocalSlurm() {
    for (pid_t pid : {slurmd_.pid, ctld_.pid}) {
      if (pid <= 0) continue;
      ::kill(pid, SIGTERM);
      if (!wait_exit(pid, std::chrono::seconds(10))) ADD_FAILURE() << "a Slurm daemon ignored SIGTERM";
    }
  }
  const std::string& why_not() const { return why_not_; }
  /// `srun ARGS` against this Slurm.
  /// The token is exported as a batch script would (srun passes it to every task): rank 0's
  /// store listens on the step's first host, and refuses to without one (Note [Tokenless stores]).
  RunResult srun(const std::string& args) const {
    return run_command(env_ + " EMBER_STORE_TOKEN=rnn-dp-launchers-test /usr/bin/srun " + args);
  }

 private:
  fs::path dir_;
  std::string env_;
  std::string why_not_;
  Child ctld_, slurmd_;
};

// Under srun the ranks take everything from SLURM_*: rank, world, local rank, the step's
// first host as MASTER_ADDR and a port from the job id (no launcher of ember's own).
TEST_F(RnnDpLaunchers, SrunTwoRanksAndThreeOnOneNodeFollowTheSingleProcess) {
  SKIP_WITHOUT_WORD_LISTS();
  LocalSlurm slurm(dir_ / "slurm");
  if (!slurm.why_not().empty()) GTEST_SKIP() << slurm.why_not();
  for (const std::string& how : {std::string("-n 2"), std::string("-N1 -n 3")}) {
    SCOPED_TRACE("srun " + how);
    const int world = how == "-n 2" ? 2 : 3;
    const std::string batch = world == 2 ? "--batch-size 64" : "--batch-size 48";
    const std::string name = "srun" + std::to_string(world);
    RunResult r = slurm.srun(how + " --kill-on-bad-exit=1 env -u MASTER_ADDR -u MASTER_PORT -u RANK -u WORLD_SIZE " +
                             RNN_DP_BINARY + " --ddp " + files(name) + " " + kSmall + " --epochs 2 " + batch);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    expect_tcp_ranks(r.output, world);
    RunResult s = rnn_dp("single" + std::to_string(world), kSmall + " --epochs 2 --single-device " + batch);
    ASSERT_EQ(s.exit_code, 0) << s.output;
    expect_same_parameters(last(name), last("single" + std::to_string(world)), 1e-5);
  }
  // ember-run inside the allocation, one per node, as docs/LAUNCHERS.md shows it.
  RunResult r = slurm.srun(std::string("-N1 -n1 sh -c '") + EMBER_RUN_BINARY +
                           " --nnodes $SLURM_NNODES --node-rank $SLURM_NODEID --nproc-per-node 2 " + RNN_DP_BINARY +
                           " --ddp " + files("ember-run-in-srun") + " " + kSmall + " --epochs 1'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[rank 1]: rnn_dp: rank 1 of 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank 0]: epoch=1 "), std::string::npos) << r.output;
}

// ---- several nodes --------------------------------------------------------------------------

// Two ember-run "nodes" on one machine, each with its own loopback address (127.0.0.2 hosts
// the store and rank 0; 127.0.0.3 is node 1, its rank reached there through --local-addr).
class TwoNodes {
 public:
  TwoNodes(const fs::path& dir, std::string token) : dir_(dir), port_(free_port()), token_(std::move(token)) {}
  // Node `n`'s ember-run running rnn_dp --ddp with `args`, logging to node<n>-<tag>.log.
  Child start(int n, const std::string& tag, const std::string& launcher_args, const std::string& args) const {
    const std::string addr = n == 0 ? "127.0.0.2" : "127.0.0.3";
    auto argv = words(std::string(EMBER_RUN_BINARY) + " --nnodes 2 --node-rank " + std::to_string(n) +
                      " --nproc-per-node 1 --master-addr 127.0.0.2 --master-port " + std::to_string(port_) +
                      " --local-addr " + addr + " " + launcher_args + " " + RNN_DP_BINARY + " --ddp " + args);
    return spawn(argv, {"EMBER_STORE_TOKEN=" + token_}, dir_ / ("node" + std::to_string(n) + "-" + tag + ".log"));
  }

 private:
  fs::path dir_;
  int port_;
  std::string token_;
};

TEST_F(RnnDpLaunchers, TwoEmberRunNodesOnLoopbackAddressesFollowTheSingleProcess) {
  SKIP_WITHOUT_WORD_LISTS();
  TwoNodes nodes(dir_, "two-nodes-token");
  const std::string args = files("nodes") + " " + kSmall + " --epochs 2 --batch-size 64";
  Child n1 = nodes.start(1, "run", "", args);  // the later node may well start first
  Child n0 = nodes.start(0, "run", "", args);
  const auto s0 = wait_exit(n0.pid, std::chrono::seconds(120));
  const auto s1 = wait_exit(n1.pid, std::chrono::seconds(30));
  const std::string out = read_file(n0.log) + read_file(n1.log);
  ASSERT_TRUE(s0 && WIFEXITED(*s0) && WEXITSTATUS(*s0) == 0) << out;
  ASSERT_TRUE(s1 && WIFEXITED(*s1) && WEXITSTATUS(*s1) == 0) << out;
  EXPECT_NE(out.find("[rank 1]: rnn_dp: rank 1 of 2 (local rank 0"), std::string::npos) << out;
  EXPECT_NE(out.find("DistributedDataParallel over 2 ranks (tcp backend)"), std::string::npos) << out;
  RunResult s = rnn_dp("single", kSmall + " --epochs 2 --single-device --batch-size 64");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  expect_same_parameters(last("nodes"), last("single"), 1e-5);
}

// ---- mpirun over two hosts -------------------------------------------------------------------

// Two mpirun "hosts" from a hostfile: 127.0.0.2 and 127.0.0.3, one slot each. OpenMPI starts
// a remote host's ranks through `ssh HOST orted ...`; with no sshd here, the launch agent
// (--mca plm_rsh_agent) is a script that runs that command on this machine, as ssh would on
// HOST, giving it what HOST would give its processes: EMBER_TCP_HOST=HOST (a real host finds
// its address on the route to MASTER_ADDR), EMBER_TCP_CMA=0 (two hosts cannot read each
// other's memory: every byte goes through the sockets) and a /tmp of its own for OpenMPI's
// session directory (orte_tmpdir_base): every daemon here has the same host name, and two
// daemons creating /tmp/ompi.<host>.<uid>/jf.<job> at once made one fail now and then with
// "mkdir ... File exists" / "orte_session_dir failed" (seen under load).
class MpiHosts {
 public:
  explicit MpiHosts(const fs::path& dir) {
#ifndef RNN_DP_MPIRUN
    why_not_ = "built without MPI (EMBER_HAVE_MPI off): no mpirun to start the hosts";
#else
    const fs::path hostfile = dir / "hosts", agent = dir / "agent.sh";
    std::ofstream(hostfile) << "127.0.0.2 slots=1\n127.0.0.3 slots=1\n";
    std::ofstream(agent) << "#!/bin/sh\n# ssh HOST COMMAND, run on this machine as if on HOST\nhost=$1\nshift\n"
                            "tmp=" << dir.string() << "/tmp-$host\nmkdir -p \"$tmp\"\n"
                            "OMPI_MCA_orte_tmpdir_base=$tmp EMBER_TCP_HOST=$host EMBER_TCP_CMA=0 exec sh -c \"$*\"\n";
    fs::permissions(agent, fs::perms::owner_all);
    prefix_ = std::string(RNN_DP_MPIRUN) + " --allow-run-as-root --hostfile " + hostfile.string() +
              " --mca plm_rsh_agent " + agent.string() + " -np 2 ";
    // Can OpenMPI start one rank on each host through the agent? If not, say what it said.
    const RunResult probe = run_command(prefix_ + "sh -c 'echo on-host=$EMBER_TCP_HOST'");
    if (probe.exit_code != 0) {
      why_not_ = "mpirun cannot start ranks on the hosts 127.0.0.2 and 127.0.0.3 here: " + probe.output;
    } else if (probe.output.find("on-host=127.0.0.2") == std::string::npos ||
               probe.output.find("on-host=127.0.0.3") == std::string::npos) {
      why_not_ = "mpirun did not start the ranks through the launch agent (it took the loopback hosts for this "
                 "one): " + probe.output;
    }
#endif
  }
  const std::string& why_not() const { return why_not_; }
  /// The mpirun command line up to the program: two ranks, one per host.
  const std::string& mpirun() const { return prefix_; }

 private:
  std::string why_not_, prefix_;
};

// The ranks take rank and world from OMPI_COMM_WORLD_*, rank 0 hosts the store on
// MASTER_ADDR (127.0.0.2; MPI carries the store token it draws), each listens and connects on
// its host's address, and training follows the single process.
TEST_F(RnnDpLaunchers, MpirunOverTwoHostsOfAHostfileFollowsTheSingleProcess) {
  SKIP_WITHOUT_WORD_LISTS();
  MpiHosts hosts(dir_);
  if (!hosts.why_not().empty()) GTEST_SKIP() << hosts.why_not();
  RunResult r = run_command(hosts.mpirun() + "-x MASTER_ADDR=127.0.0.2 -x MASTER_PORT=" + std::to_string(free_port()) +
                            " " + RNN_DP_BINARY + " --ddp --backend tcp " + files("mpi-hosts") + " " + kSmall +
                            " --epochs 2 --batch-size 64");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(rank 0 of 2 \(local rank 0, pid \d+\), tcp backend, )"
                                                     R"(listening on 127\.0\.0\.2:\d+)")))
      << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(rank 1 of 2 \(local rank 0, pid \d+\), tcp backend, )"
                                                     R"(listening on 127\.0\.0\.3:\d+)")))
      << r.output;
  EXPECT_NE(r.output.find("DistributedDataParallel over 2 ranks (tcp backend)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("epoch=2 "), std::string::npos) << r.output;
  RunResult s = rnn_dp("single", kSmall + " --epochs 2 --single-device --batch-size 64");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  expect_same_parameters(last("mpi-hosts"), last("single"), 1e-5);
}

// Node 1's ember-run is SIGKILLed in epoch 2: its rank dies with it (the guardian), node 0's
// rank fails with a DistributedError naming rank 1 well within the 60 s timeout, and node 0's
// ember-run (--max-restarts 1) starts round 1 in a fresh store. A replacement node 1 (as a
// scheduler would start one) joins round 1, and the group resumes from the checkpoint.
TEST_F(RnnDpLaunchers, LostNodeFailsTheOtherAndAReplacementJoinsTheRestart) {
  SKIP_WITHOUT_WORD_LISTS();
  TwoNodes nodes(dir_, "lost-node-token");
  const std::string args = "--resume " + files("lost") + " " + kLong;
  Child n0 = nodes.start(0, "first", "--max-restarts 1", args);
  Child n1 = nodes.start(1, "first", "--max-restarts 1", args);
  if (!wait_for(n0.log, std::regex(R"(\[rank 0\]: epoch=1 )"), std::chrono::seconds(120))) {
    wait_exit(n0.pid, std::chrono::seconds(0));
    wait_exit(n1.pid, std::chrono::seconds(0));
    FAIL() << "the job never finished epoch 1:\n" << read_file(n0.log) << read_file(n1.log);
  }
  ASSERT_EQ(::kill(n1.pid, SIGKILL), 0);
  const auto t0 = Clock::now();
  ASSERT_TRUE(wait_exit(n1.pid, std::chrono::seconds(10)).has_value());
  const auto noticed = wait_for(n0.log, std::regex("restarting the worker group \\(restart 1 of 1\\)"),
                                std::chrono::seconds(60));
  ASSERT_TRUE(noticed) << read_file(n0.log);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 30.0) << "noticed only at the timeout";
  const std::string before = read_file(n0.log);
  EXPECT_NE(before.find("[rank 0]: rnn_dp: error: DistributedError: "), std::string::npos) << before;
  EXPECT_NE(before.find("rank 1"), std::string::npos) << before;

  Child replacement = nodes.start(1, "replacement", "--max-restarts 1", args);
  const auto s0 = wait_exit(n0.pid, std::chrono::seconds(240));
  const auto s1 = wait_exit(replacement.pid, std::chrono::seconds(30));
  const std::string out0 = read_file(n0.log), out1 = read_file(replacement.log);
  ASSERT_TRUE(s0 && WIFEXITED(*s0) && WEXITSTATUS(*s0) == 0) << out0 << out1;
  ASSERT_TRUE(s1 && WIFEXITED(*s1) && WEXITSTATUS(*s1) == 0) << out0 << out1;
  EXPECT_NE(out0.find("tcp backend, restart 1"), std::string::npos) << out0;
  EXPECT_NE(out1.find("[rank 1]: rnn_dp: rank 1 of 2"), std::string::npos) << out1;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out0, m, std::regex(R"(resumed from \S+ \(epoch (\d) done\))"))) << out0;
  EXPECT_GE(std::stoi(m[1].str()), 1) << out0;
  EXPECT_NE(out0.find("[rank 0]: " + kLastEpoch), std::string::npos) << out0;
}

}  // namespace
}  // namespace rnn_dp_test
