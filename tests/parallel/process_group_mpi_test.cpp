// The mpi backend, run by ctest as `mpirun --allow-run-as-root --oversubscribe -np 2
// process_group_mpi_test`: every rank runs every test in the same order, so the collectives
// match. The closed-form table (process_group_test_util.h), init_process_group("mpi") from
// mpirun's environment, argument errors, wait timeouts and send/recv. Run on its own (not
// under mpirun) it is a world of one, and still passes.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "core/error.h"
#include "core/ops/factory.h"
#include "parallel/distributed/init.h"
#include "parallel/distributed/mpi/process_group_mpi.h"
#include "parallel/distributed/tcp_store.h"
#include "tests/parallel/process_group_test_util.h"
#include "tests/support/free_port.h"
#include "tests/support/error_text.h"

namespace ember::parallel {
namespace {

std::shared_ptr<ProcessGroup> group() {
  static std::shared_ptr<ProcessGroup> pg = [] {
    InitOptions o;
    o.timeout_ms = 60'000;
    return init_process_group("mpi", o);
  }();
  return pg;
}

TEST(ProcessGroupMPI, InitFromMpirunEnvironment) {
  auto pg = group();
  EXPECT_EQ(pg->backend_name(), "mpi");
  if (const char* r = std::getenv("OMPI_COMM_WORLD_RANK")) {
    EXPECT_EQ(pg->rank(), std::atoi(r));
  }
  if (const char* n = std::getenv("OMPI_COMM_WORLD_SIZE")) {
    EXPECT_EQ(pg->size(), std::atoi(n));
  }
}

TEST(ProcessGroupMPI, EveryCollectiveDtypeOpAndSizeHasClosedFormResults) {
  EXPECT_EQ(test::run_all_checks(*group()), "") << "rank " << group()->rank();
}

TEST(ProcessGroupMPI, ManyQueuedCollectivesFinishInOrder) {
  auto pg = group();
  std::vector<Tensor> ts;
  std::vector<std::shared_ptr<Work>> works;
  for (int k = 0; k < 10; ++k) {
    ts.push_back(test::rank_values(kFloat32, 1000 + k, pg->rank()));
    works.push_back(pg->all_reduce(ts.back(), ReduceOp::MAX));
  }
  for (auto& w : works) w->wait();
  for (int k = 0; k < 10; ++k)
    EXPECT_EQ(test::compare("queued", ts[k], 1000 + k,
                            [&](int64_t i) { return test::expected_reduction(ReduceOp::MAX, kFloat32, pg->size(), i); }),
              "");
}

TEST(ProcessGroupMPI, SendRecvBothDirectionsPostedFirst) {
  auto pg = group();
  if (pg->size() < 2) GTEST_SKIP() << "needs two ranks (run under mpirun -np 2)";
  EXPECT_EQ(test::check_send_recv(*pg, kFloat32, 4 << 20), "");  // 16 MiB: beyond eager sizes
  EXPECT_EQ(test::check_send_recv(*pg, kBFloat16, 11), "");
}

TEST(ProcessGroupMPI, RecvOfTheWrongSizeIsADistributedError) {
  auto pg = group();
  if (pg->size() < 2) GTEST_SKIP() << "needs two ranks (run under mpirun -np 2)";
  if (pg->rank() == 0) {
    pg->send(zeros({5}), 1, 9)->wait();
  } else if (pg->rank() == 1) {
    EXPECT_THROW(pg->recv(zeros({8}), 0, 9)->wait(), DistributedError);
  }
}

TEST(ProcessGroupMPI, WaitTimeoutLeavesTheCollectiveRunning) {
  auto pg = group();
  if (pg->size() < 2) GTEST_SKIP() << "needs two ranks (run under mpirun -np 2)";
  Tensor t = test::rank_values(kFloat64, 100, pg->rank());
  if (pg->rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto w = pg->all_reduce(t);
  if (pg->rank() == 0) {
    EXPECT_THROW(w->wait(20), TimeoutError);
  }
  w->wait();
  EXPECT_EQ(test::compare("after timeout", t, 100,
                          [&](int64_t i) { return test::expected_reduction(ReduceOp::SUM, kFloat64, pg->size(), i); }),
            "");
  pg->barrier()->wait();
}

// Note [Desync check] on the mpi backend: a broadcast on rank 0 against an all_reduce on rank
// 1 fails on both ranks naming each call, before MPI runs either (the group stays usable).
TEST(ProcessGroupMPI, DesyncCheckNamesEachRanksCall) {
  auto pg = group();
  if (pg->size() < 2) GTEST_SKIP() << "needs two ranks (run under mpirun -np 2)";
  pg->set_debug_level(DebugLevel::kDetail);
  std::string error;
  try {
    if (pg->rank() == 0) {
      pg->broadcast(zeros({512}), 0)->wait(30'000);
    } else {
      pg->all_reduce(zeros({1024}))->wait(30'000);
    }
  } catch (const DistributedError& e) {
    error = e.what();
  }
  pg->set_debug_level(DebugLevel::kOff);
  EXPECT_NE(error.find("desync detected"), std::string::npos) << error;
  EXPECT_NE(error.find("called broadcast"), std::string::npos) << error;
  EXPECT_NE(error.find("(float32, [512], root 0)"), std::string::npos) << error;
  EXPECT_NE(error.find("(float32, [1024], sum)"), std::string::npos) << error;
  Tensor t = ones({3});
  pg->all_reduce(t)->wait(30'000);  // still usable
  EXPECT_EQ(t.to_vector<float>()[0], static_cast<float>(pg->size()));
}

// Note [Argument check]: MPI_Bcast with mismatched roots would return on both ranks, and
// MPI_Reduce would hang. Without any debug level, both fail on every rank naming each rank's
// root, before MPI runs them, and the group stays usable.
TEST(ProcessGroupMPI, MismatchedRootsFailNamingEachRanksRoot) {
  auto pg = group();
  if (pg->size() < 2) GTEST_SKIP() << "needs two ranks (run under mpirun -np 2)";
  ASSERT_EQ(pg->debug_level(), DebugLevel::kOff);
  for (OpType type : {OpType::BROADCAST, OpType::REDUCE}) {
    std::string error;
    try {
      Tensor t = ones({16});
      const int root = pg->rank() == 0 ? 0 : 1;
      auto work = type == OpType::BROADCAST ? pg->broadcast(t, root) : pg->reduce(t, root);
      work->wait(30'000);
    } catch (const DistributedError& e) {
      error = e.what();
    }
    const std::string name = op_type_name(type);
    EXPECT_NE(error.find("argument mismatch"), std::string::npos) << error;
    EXPECT_NE(error.find("rank 0 called " + name), std::string::npos) << error;
    EXPECT_NE(error.find("[16], root 0"), std::string::npos) << error;
    EXPECT_NE(error.find("rank 1 called " + name), std::string::npos) << error;
    EXPECT_NE(error.find("[16], root 1"), std::string::npos) << error;
  }
  Tensor t = ones({3});
  pg->broadcast(t, 1)->wait(30'000);  // matching roots still run
  pg->all_reduce(t)->wait(30'000);
  EXPECT_EQ(t.to_vector<float>()[0], static_cast<float>(pg->size()));
}

TEST(ProcessGroupMPI, ArgumentErrors) {
  auto pg = group();
  Tensor t = zeros({4, 4});
  EXPECT_THROW(pg->all_reduce(native::transpose(t, 0, 1)), ValueError);
  EXPECT_THROW(pg->broadcast(t, pg->size()), ValueError);
  EXPECT_THROW(pg->all_reduce(zeros({2}, kBool)), TypeError);
  pg->barrier()->wait();
}

// Issue 19, 7(c): under mpirun nobody hands out a store token, so the store rank 0 hosts for
// a tcp group let any client in (and read the group's join secret). Now rank 0 draws a token
// and MPI carries it to every rank: the group forms, a client without it is refused.
TEST(MpiLaunch, TcpGroupStoreNeedsTheTokenPassedThroughMpi) {
  if (std::getenv("OMPI_COMM_WORLD_RANK") == nullptr) GTEST_SKIP() << "not under mpirun";
  auto mpi_pg = group();
  std::vector<uint8_t> port_bytes(2, 0);
  if (mpi::world_rank() == 0) {  // a port that was free a moment ago, chosen once for all
    const uint16_t p = support::free_port();
    port_bytes = {uint8_t(p >> 8), uint8_t(p & 0xff)};
  }
  port_bytes = mpi::broadcast_bytes(port_bytes, 2);
  const int port = port_bytes[0] << 8 | port_bytes[1];
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  ::unsetenv("EMBER_STORE_TOKEN");
  InitOptions o;
  o.timeout_ms = 60'000;
  auto tcp_pg = init_process_group("tcp", o);
  EXPECT_EQ(tcp_pg->size(), mpi_pg->size());
  EXPECT_EQ(test::check_all_reduce(*tcp_pg, kFloat32, 100, ReduceOp::SUM), "");
  TCPStoreOptions stranger;
  stranger.timeout_ms = 10'000;
  const std::string err = support::error_of<DistributedError>([&] {
    TCPStore client("127.0.0.1", static_cast<uint16_t>(port), stranger);
  });
  EXPECT_NE(err.find("authentication failed"), std::string::npos) << err;
  tcp_pg->barrier()->wait();  // nobody leaves (rank 0 takes the store down) before all checked
  destroy_process_group();
  ::unsetenv("MASTER_ADDR");
  ::unsetenv("MASTER_PORT");
}

}  // namespace
}  // namespace ember::parallel
