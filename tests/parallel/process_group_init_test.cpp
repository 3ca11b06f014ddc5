// init_process_group and read_distributed_env: which variables are read, the errors for
// missing or malformed ones (each names the variable), explicit options and stores, and
// the default group. Multi-process initialization is in process_group_tcp_process_test.cpp.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "tests/support/free_port.h"
#include "tests/support/error_text.h"
#include "core/config.h"
#include "core/error.h"
#include "parallel/distributed/hash_store.h"
#include "parallel/distributed/init.h"
#include "tests/parallel/process_group_test_util.h"

namespace ember::parallel {
namespace {

const char* const kVars[] = {"RANK",
                             "WORLD_SIZE",
                             "LOCAL_RANK",
                             "LOCAL_WORLD_SIZE",
                             "MASTER_ADDR",
                             "MASTER_PORT",
                             "EMBER_STORE_TOKEN",
                             "EMBER_STORE_ALLOW_NO_TOKEN",
                             "EMBER_STORE_BIND_ADDR",
                             "EMBER_USE_AGENT_STORE",
                             "TORCHELASTIC_USE_AGENT_STORE",
                             "EMBER_RESTART_COUNT",
                             "TORCHELASTIC_RESTART_COUNT",
                             "OMPI_COMM_WORLD_RANK",
                             "OMPI_COMM_WORLD_SIZE",
                             "OMPI_COMM_WORLD_LOCAL_RANK",
                             "OMPI_COMM_WORLD_LOCAL_SIZE",
                             // ctest itself may run inside a Slurm job step
                             "SLURM_PROCID",
                             "SLURM_NTASKS",
                             "SLURM_NPROCS",
                             "SLURM_LOCALID",
                             "SLURM_NODEID",
                             "SLURM_STEP_NODELIST",
                             "SLURM_JOB_NODELIST",
                             "SLURM_NODELIST",
                             "SLURM_NTASKS_PER_NODE",
                             "SLURM_STEP_TASKS_PER_NODE",
                             "SLURM_TASKS_PER_NODE",
                             "SLURM_JOB_ID",
                             "SLURM_JOBID",
                             "SLURM_STEP_ID"};

class InitEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) ::unsetenv(v);
  }
  void TearDown() override {
    for (const char* v : kVars) ::unsetenv(v);
    destroy_process_group();
  }
  static void set(const char* k, const char* v) { ::setenv(k, v, 1); }
};

using support::error_of;

TEST_F(InitEnv, ReadsTorchrunVariables) {
  set("RANK", "2");
  set("WORLD_SIZE", "4");
  set("LOCAL_RANK", "0");
  set("LOCAL_WORLD_SIZE", "2");
  set("MASTER_ADDR", "10.0.0.1");
  set("MASTER_PORT", "29500");
  set("EMBER_STORE_TOKEN", "secret");
  set("EMBER_USE_AGENT_STORE", "1");
  set("EMBER_RESTART_COUNT", "3");
  const DistributedEnv env = read_distributed_env();
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.master_addr, "10.0.0.1");
  EXPECT_EQ(env.master_port, 29500);
  EXPECT_EQ(env.store_token, "secret");
  EXPECT_TRUE(env.launcher_store);
  EXPECT_EQ(env.restart_count, 3);
  EXPECT_FALSE(env.under_mpirun);
}

TEST_F(InitEnv, ReadsOpenMpiVariablesUnderMpirun) {
  set("OMPI_COMM_WORLD_RANK", "1");
  set("OMPI_COMM_WORLD_SIZE", "2");
  set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
  set("TORCHELASTIC_USE_AGENT_STORE", "True");
  const DistributedEnv env = read_distributed_env();
  EXPECT_EQ(env.rank, 1);
  EXPECT_EQ(env.world_size, 2);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_TRUE(env.under_mpirun);
  EXPECT_TRUE(env.launcher_store);
}

TEST_F(InitEnv, MalformedVariablesAreValueErrorsNamingThem) {
  const std::pair<const char*, const char*> bad[] = {{"RANK", "one"},        {"RANK", "-1"},
                                                     {"WORLD_SIZE", "0"},    {"WORLD_SIZE", "4x"},
                                                     {"LOCAL_RANK", ""},     {"MASTER_PORT", "70000"},
                                                     {"MASTER_PORT", "http"}, {"OMPI_COMM_WORLD_SIZE", "two"}};
  for (const auto& [name, value] : bad) {
    SetUp();
    set(name, value);
    if (std::string(value).empty()) continue;  // an empty variable counts as unset
    const std::string msg = error_of<ValueError>([] { read_distributed_env(); });
    EXPECT_NE(msg.find(name), std::string::npos) << name << "=" << value << ": " << msg;
  }
}

TEST_F(InitEnv, MissingVariablesAreValueErrorsNamingThem) {
  EXPECT_NE(error_of<ValueError>([] { init_process_group("tcp"); }).find("RANK"), std::string::npos);
  set("RANK", "0");
  EXPECT_NE(error_of<ValueError>([] { init_process_group("tcp"); }).find("WORLD_SIZE"), std::string::npos);
  set("WORLD_SIZE", "2");
  EXPECT_NE(error_of<ValueError>([] { init_process_group("tcp"); }).find("MASTER_ADDR"), std::string::npos);
  set("MASTER_ADDR", "127.0.0.1");
  EXPECT_NE(error_of<ValueError>([] { init_process_group("tcp"); }).find("MASTER_PORT"), std::string::npos);
  set("RANK", "2");
  set("MASTER_PORT", "1234");
  EXPECT_NE(error_of<ValueError>([] { init_process_group("tcp"); }).find("rank 2 is not below world_size 2"), std::string::npos);
}

TEST_F(InitEnv, UnknownBackendAndInitMethodAreValueErrors) {
  EXPECT_NE(error_of<ValueError>([] { init_process_group("gloo"); }).find("gloo"), std::string::npos);
  InitOptions o;
  o.rank = 0;
  o.world_size = 1;
  o.init_method = "carrier-pigeon://x";
  EXPECT_NE(error_of<ValueError>([&] { init_process_group("tcp", o); }).find("carrier-pigeon"), std::string::npos);
  o.init_method = "tcp://nohostport";
  EXPECT_NE(error_of<ValueError>([&] { init_process_group("tcp", o); }).find("tcp://host:port"), std::string::npos);
#if !EMBER_HAVE_NCCL
  o.init_method = "";
  EXPECT_NE(error_of<ValueError>([&] { init_process_group("nccl", o); }).find("not built"), std::string::npos);
#endif
}

TEST_F(InitEnv, ExplicitStoreRankAndWorldSizeNeedNoEnvironment) {
  auto store = std::make_shared<HashStore>();
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      try {
        InitOptions o;
        o.rank = r;
        o.world_size = 3;
        o.store = store;
        o.timeout_ms = 20'000;
        // init_process_group replaces the process-wide default group; ranks as threads keep
        // their own handle instead.
        auto pg = init_process_group("tcp", o);
        errors[r] = test::check_all_reduce(*pg, kFloat32, 100, ReduceOp::SUM);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  EXPECT_TRUE(is_initialized());
}

TEST_F(InitEnv, FileInitMethodAndDefaultGroup) {
  const std::string path = ::testing::TempDir() + "/ember_pg_init_" + std::to_string(::getpid());
  InitOptions o;
  o.rank = 0;
  o.world_size = 1;
  o.init_method = "file://" + path;
  EXPECT_FALSE(is_initialized());
  auto pg = init_process_group("tcp", o);
  EXPECT_TRUE(is_initialized());
  EXPECT_EQ(default_process_group().get(), pg.get());
  EXPECT_EQ(test::check_all_reduce(*pg, kInt64, 10, ReduceOp::SUM), "");
  destroy_process_group();
  EXPECT_FALSE(is_initialized());
  EXPECT_THROW(default_process_group(), Error);
  std::remove(path.c_str());
}

TEST_F(InitEnv, SingleRankRunsWithOnlyAStore) {
  set("RANK", "0");
  set("WORLD_SIZE", "1");
  InitOptions o;
  o.store = std::make_shared<HashStore>();
  auto pg = init_process_group("tcp", o);
  EXPECT_EQ(pg->size(), 1);
  EXPECT_EQ(test::run_all_checks(*pg, /*quick=*/true), "");
}

// errno of connecting to ip:port (0: connected).
int connect_errno(in_addr ip, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr = ip;
  a.sin_port = htons(static_cast<uint16_t>(port));
  const int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  const int err = rc == 0 ? 0 : errno;
  ::close(fd);
  return err;
}

// Issue 19, 7(c): rank 0 hosted its store on 0.0.0.0 with an empty token even when
// MASTER_ADDR was 127.0.0.1, so anyone on the network could read the group's join secret.
// It now listens only on MASTER_ADDR's interface.
TEST_F(InitEnv, StoreHostedByRankZeroListensOnlyOnMasterAddr) {
  in_addr other{};
  bool found = false;
  ifaddrs* ifs = nullptr;
  ASSERT_EQ(::getifaddrs(&ifs), 0);
  for (ifaddrs* i = ifs; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK)) continue;
    other = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
    found = true;
  }
  ::freeifaddrs(ifs);
  if (!found) GTEST_SKIP() << "this machine has no IPv4 address besides loopback";
  const int port = support::free_port();
  const std::string port_s = std::to_string(port);
  set("RANK", "0");
  set("WORLD_SIZE", "1");
  set("MASTER_ADDR", "127.0.0.1");
  set("MASTER_PORT", port_s.c_str());
  auto pg = init_process_group("tcp");
  in_addr loopback{};
  loopback.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect_errno(loopback, port), 0) << "the store is not on 127.0.0.1:" << port;
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &other, text, sizeof text);
  EXPECT_EQ(connect_errno(other, port), ECONNREFUSED) << "the store is reachable at " << text << ":" << port;
}

// Note [Tokenless stores]: outside ember-run and mpirun nobody hands out a token, so a store
// rank 0 hosts on an address others can reach (srun's first host, a hand-set MASTER_ADDR)
// would give anyone there the group's join secret. Every rank refuses, naming the one-line
// fix, unless a token is exported or EMBER_STORE_ALLOW_NO_TOKEN=1 opts in; loopback is fine.
TEST_F(InitEnv, TokenlessStoreOnAReachableAddressIsRefusedWithTheFix) {
  const int port = support::free_port();
  const std::string port_s = std::to_string(port);
  set("WORLD_SIZE", "1");
  set("MASTER_PORT", port_s.c_str());
  set("MASTER_ADDR", "127.0.0.1");
  set("EMBER_STORE_BIND_ADDR", "0.0.0.0");  // every interface: reachable
  for (const char* rank : {"0", "1"}) {
    set("RANK", rank);
    set("WORLD_SIZE", rank[0] == '0' ? "1" : "2");
    const std::string m = error_of<ValueError>([] { init_process_group("tcp"); });
    EXPECT_NE(m.find("without a token"), std::string::npos) << m;
    EXPECT_NE(m.find("export EMBER_STORE_TOKEN="), std::string::npos) << m;
    EXPECT_NE(m.find("EMBER_STORE_ALLOW_NO_TOKEN=1"), std::string::npos) << m;
  }
  set("RANK", "0");
  set("WORLD_SIZE", "1");
  set("EMBER_STORE_ALLOW_NO_TOKEN", "yes");  // only 1 opts in, and the message says so
  EXPECT_NE(error_of<ValueError>([] { init_process_group("tcp"); }).find("EMBER_STORE_ALLOW_NO_TOKEN='yes' is not 1"),
            std::string::npos);
  set("EMBER_STORE_ALLOW_NO_TOKEN", "1");
  init_process_group("tcp");
  destroy_process_group();
  ::unsetenv("EMBER_STORE_ALLOW_NO_TOKEN");
  set("EMBER_STORE_TOKEN", "a-token-the-batch-script-exported");
  init_process_group("tcp");
  destroy_process_group();
  ::unsetenv("EMBER_STORE_TOKEN");
  ::unsetenv("EMBER_STORE_BIND_ADDR");  // MASTER_ADDR 127.0.0.1's interface: loopback only
  init_process_group("tcp");
}

}  // namespace
}  // namespace ember::parallel
