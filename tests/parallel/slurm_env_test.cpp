// Slurm's notations and environment as ember reads them under srun: host lists and
// tasks-per-node specs (table tests, valid and malformed), and read_distributed_env taking
// rank, sizes, MASTER_ADDR (the step's first host) and MASTER_PORT (from the job id) from
// SLURM_* when no launcher set torchrun's or OpenMPI's names. A real srun run is in
// examples/rnn_dp (rnn_dp_launchers_test).
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/error.h"
#include "parallel/distributed/init.h"
#include "parallel/distributed/slurm.h"
#include "tests/support/error_text.h"

namespace ember::parallel {
namespace {

using Hosts = std::vector<std::string>;

TEST(Hostlist, ExpandsEveryNotationSlurmWrites) {
  const std::pair<const char*, Hosts> table[] = {
      {"node01", {"node01"}},
      {"localhost", {"localhost"}},
      {"a,b,c", {"a", "b", "c"}},
      {"node[1-3]", {"node1", "node2", "node3"}},
      {"node[01-04,07]", {"node01", "node02", "node03", "node04", "node07"}},
      {"node[08-11]", {"node08", "node09", "node10", "node11"}},
      {"node[098-101]", {"node098", "node099", "node100", "node101"}},
      {"n[7]", {"n7"}},
      {"n[3,1]", {"n3", "n1"}},
      {"gpu[1-2],cpu05,io[10-11]", {"gpu1", "gpu2", "cpu05", "io10", "io11"}},
      {"rack[1-2]-n[1-2]", {"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}},
      {"n[1-2].cluster", {"n1.cluster", "n2.cluster"}},
      {"10.0.0.[1-2]", {"10.0.0.1", "10.0.0.2"}},
      {"[1-2]x", {"1x", "2x"}},
  };
  for (const auto& [text, expected] : table) EXPECT_EQ(expand_hostlist(text), expected) << text;
}

TEST(Hostlist, MalformedListsAreValueErrorsSayingWhereAndWhat) {
  const std::pair<const char*, const char*> table[] = {
      {"", "expected a host name"},
      {"a,,b", "at position 2: expected a host name"},
      {"a,", "at position 2: expected a host name"},
      {"node[1-3", "expected ','"},
      {"node[]", "expected a number"},
      {"node[a-b]", "expected a number"},
      {"node[3-1]", "end is not below its start"},
      {"node1]", "expected a host name character or '['"},
      {"node[1-]", "expected a number"},
      {"n[1-1000000000]", "more than"},
  };
  for (const auto& [text, expected] : table) {
    const std::string err = support::error_of<ValueError>([&] { expand_hostlist(text); });
    EXPECT_NE(err.find(expected), std::string::npos) << text << ": " << err;
    EXPECT_NE(err.find(std::string("'") + text + "'"), std::string::npos) << err;
  }
}

TEST(TasksPerNode, ExpandsRepeatsAndRejectsGarbage) {
  EXPECT_EQ(expand_tasks_per_node("4"), std::vector<int>({4}));
  EXPECT_EQ(expand_tasks_per_node("2(x3),1"), std::vector<int>({2, 2, 2, 1}));
  EXPECT_EQ(expand_tasks_per_node("1,3(x2)"), std::vector<int>({1, 3, 3}));
  for (const char* bad : {"", "2(x)", "2(3)", "2(x3", "x", "2,,1", "2(x0)"})
    EXPECT_THROW(expand_tasks_per_node(bad), ValueError) << bad;
}

TEST(SlurmMasterPort, SameForEveryTaskOfAStepAndDistinctAcrossSteps) {
  EXPECT_EQ(slurm_master_port(4242, 0), slurm_master_port(4242, 0));
  EXPECT_NE(slurm_master_port(4242, 0), slurm_master_port(4242, 1));
  for (int64_t job : {int64_t{0}, int64_t{1}, int64_t{123456789}, int64_t{1} << 40}) {
    const int p = slurm_master_port(job, 3);
    EXPECT_GE(p, 15000);
    EXPECT_LT(p, 35000);
  }
}

const char* const kVars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_STEP_NODELIST",
    "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_NTASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE", "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_STEP_ID"};

class SlurmEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) ::unsetenv(v);
  }
  void TearDown() override { SetUp(); }
  static void set(const char* k, const char* v) { ::setenv(k, v, 1); }
  // What srun exports to task 4 of `srun -N3 -n7` (tasks 3 and 4 on the second node).
  static void srun_task_4_of_7() {
    set("SLURM_PROCID", "4");
    set("SLURM_NTASKS", "7");
    set("SLURM_LOCALID", "1");
    set("SLURM_NODEID", "1");
    set("SLURM_STEP_NODELIST", "node[07-08],gpu3");
    set("SLURM_JOB_NODELIST", "node[01-09],gpu[1-3]");
    set("SLURM_STEP_TASKS_PER_NODE", "3,2(x2)");
    set("SLURM_TASKS_PER_NODE", "3,2(x2)");
    set("SLURM_JOB_ID", "81234");
    set("SLURM_STEP_ID", "2");
  }
};

TEST_F(SlurmEnv, ReadsRankSizesAndTheStepsFirstHostAsMaster) {
  srun_task_4_of_7();
  const DistributedEnv env = read_distributed_env();
  EXPECT_TRUE(env.under_srun);
  EXPECT_FALSE(env.under_mpirun);
  EXPECT_EQ(env.rank, 4);
  EXPECT_EQ(env.world_size, 7);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 2);  // the second node's entry of 3,2(x2)
  EXPECT_EQ(env.master_addr, "node07");
  EXPECT_EQ(env.master_port, slurm_master_port(81234, 2));
  EXPECT_FALSE(env.launcher_store);  // rank 0 hosts the store
}

TEST_F(SlurmEnv, ExplicitMasterAndNtasksPerNodeWin) {
  srun_task_4_of_7();
  set("MASTER_ADDR", "10.1.2.3");
  set("MASTER_PORT", "29511");
  set("SLURM_NTASKS_PER_NODE", "5");
  const DistributedEnv env = read_distributed_env();
  EXPECT_EQ(env.master_addr, "10.1.2.3");
  EXPECT_EQ(env.master_port, 29511);
  EXPECT_EQ(env.local_world_size, 5);
}

TEST_F(SlurmEnv, LaunchersInsideAnAllocationTakePrecedence) {
  srun_task_4_of_7();
  set("RANK", "1");  // ember-run (or torchrun) started by srun, one per node
  set("WORLD_SIZE", "2");
  DistributedEnv env = read_distributed_env();
  EXPECT_FALSE(env.under_srun);
  EXPECT_EQ(env.rank, 1);
  EXPECT_EQ(env.world_size, 2);
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  set("OMPI_COMM_WORLD_RANK", "0");  // mpirun inside the allocation
  set("OMPI_COMM_WORLD_SIZE", "3");
  env = read_distributed_env();
  EXPECT_FALSE(env.under_srun);
  EXPECT_TRUE(env.under_mpirun);
  EXPECT_EQ(env.world_size, 3);
}

TEST_F(SlurmEnv, JobNodelistIsTheFallbackAndBatchStepIdsAreIgnored) {
  set("SLURM_PROCID", "0");
  set("SLURM_NTASKS", "1");
  set("SLURM_JOB_NODELIST", "c[3-4]");
  set("SLURM_JOBID", "77");
  set("SLURM_STEP_ID", "batch");
  const DistributedEnv env = read_distributed_env();
  EXPECT_EQ(env.master_addr, "c3");
  EXPECT_EQ(env.master_port, slurm_master_port(77, 0));
}

TEST_F(SlurmEnv, MalformedVariablesAreValueErrorsNamingThem) {
  const std::pair<const char*, const char*> bad[] = {{"SLURM_PROCID", "x"},
                                                     {"SLURM_NTASKS", "0"},
                                                     {"SLURM_LOCALID", "-2"},
                                                     {"SLURM_STEP_NODELIST", "node[1-"},
                                                     {"SLURM_TASKS_PER_NODE", "2(x"},
                                                     {"SLURM_JOB_ID", "abc"}};
  for (const auto& [name, value] : bad) {
    SetUp();
    set("SLURM_PROCID", "0");
    set("SLURM_NTASKS", "2");
    set(name, value);
    const std::string err = support::error_of<ValueError>([&] { read_distributed_env(); });
    EXPECT_NE(err.find(name), std::string::npos) << err;
  }
  SetUp();
  set("SLURM_PROCID", "0");
  set("SLURM_NTASKS", "2");
  set("SLURM_NODEID", "3");
  set("SLURM_TASKS_PER_NODE", "2(x2)");
  EXPECT_THROW(read_distributed_env(), ValueError);  // node 3 of a two-node spec
}

}  // namespace
}  // namespace ember::parallel
