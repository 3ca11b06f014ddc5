// ProcessGroup's debugging aids on the tcp backend, ranks as threads (process_group_debug.h):
// the desync check (EMBER_DISTRIBUTED_DEBUG=DETAIL) fails every rank with a message naming each
// rank's call instead of letting mismatched collectives run; matching collectives still give
// their closed-form results under it; the flight recorder and the debug store name the last
// collective each rank entered when a rank stops calling collectives. The mpi backend's
// desync test is in process_group_mpi_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/ops/factory.h"
#include "parallel/distributed/hash_store.h"
#include "parallel/distributed/init.h"
#include "parallel/distributed/tcp/process_group_tcp.h"
#include "tests/parallel/process_group_test_util.h"

namespace ember::parallel {
namespace {

using ::testing::HasSubstr;

// Runs fn(rank, group) on one thread per rank over one HashStore; returns each rank's error text.
std::vector<std::string> on_ranks(int world, int64_t timeout_ms, DebugLevel level,
                                  const std::function<void(int, ProcessGroupTCP&, std::shared_ptr<Store>)>& fn) {
  auto store = std::make_shared<HashStore>();
  std::vector<std::string> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        ProcessGroupTCPOptions o;
        o.timeout_ms = timeout_ms;
        o.host = "127.0.0.1";
        ProcessGroupTCP pg(store, r, world, o);
        pg.set_debug_level(level);
        fn(r, pg, store);
      } catch (const DistributedError& e) {
        errors[r] = e.what();
      } catch (const std::exception& e) {
        errors[r] = std::string("not a DistributedError: ") + e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

TEST(DesyncCheck, DifferentCollectivesFailOnEveryRankNamingEachCall) {
  auto errors = on_ranks(2, 20000, DebugLevel::kDetail, [](int r, ProcessGroupTCP& pg, std::shared_ptr<Store>) {
    pg.all_reduce(ones({4}))->wait();  // #1 matches
    if (r == 0) {
      pg.broadcast(zeros({512}), 0)->wait();
    } else {
      pg.all_reduce(zeros({1024}))->wait();
    }
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(errors[r], HasSubstr("desync detected")) << "rank " << r;
    EXPECT_THAT(errors[r], HasSubstr("rank 0 called broadcast #2 (float32, [512], root 0)")) << "rank " << r;
    EXPECT_THAT(errors[r], HasSubstr("rank 1 called all_reduce #2 (float32, [1024], sum)")) << "rank " << r;
  }
}

TEST(DesyncCheck, ShapeMismatchOfTheSameCollectiveIsNamed) {
  auto errors = on_ranks(2, 20000, DebugLevel::kDetail, [](int r, ProcessGroupTCP& pg, std::shared_ptr<Store>) {
    pg.all_reduce(zeros({r == 0 ? 8 : 6, 2}), ReduceOp::AVG)->wait();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(errors[r], HasSubstr("rank 0 called all_reduce #1 (float32, [8, 2], avg)")) << "rank " << r;
    EXPECT_THAT(errors[r], HasSubstr("rank 1 called all_reduce #1 (float32, [6, 2], avg)")) << "rank " << r;
  }
}

TEST(DesyncCheck, MatchingCollectivesKeepTheirClosedFormResults) {
  auto errors = on_ranks(3, 20000, DebugLevel::kDetail, [](int r, ProcessGroupTCP& pg, std::shared_ptr<Store>) {
    EXPECT_EQ(test::run_all_checks(pg, /*quick=*/true), "") << "rank " << r;
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(DesyncCheck, EnvironmentVariableTurnsItOn) {
  ::setenv("EMBER_DISTRIBUTED_DEBUG", "DETAIL", 1);
  EXPECT_EQ(debug_level_from_env(), DebugLevel::kDetail);
  ::setenv("EMBER_DISTRIBUTED_DEBUG", "bogus", 1);
  EXPECT_THROW(debug_level_from_env(), ValueError);
  ::unsetenv("EMBER_DISTRIBUTED_DEBUG");
  EXPECT_EQ(debug_level_from_env(), DebugLevel::kOff);
}

// Rank 0 stops after collective #2; rank 1 calls #3 and times out: its error carries the
// flight recorder and, through the debug store, the last collective each rank entered.
TEST(FlightRecorder, TimeoutNamesTheLastCollectiveOfEveryRank) {
  std::latch done(2);
  auto errors = on_ranks(2, 600, DebugLevel::kDetail, [&](int r, ProcessGroupTCP& pg, std::shared_ptr<Store> store) {
    pg.set_debug_store(store);
    try {
      pg.all_reduce(ones({4}))->wait();
      pg.broadcast(ones({3}), 1)->wait();
      if (r == 1) pg.all_reduce(ones({5}))->wait();
    } catch (...) {
      done.arrive_and_wait();
      throw;
    }
    done.arrive_and_wait();  // rank 0 stays alive: its loop ended, it did not die
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_THAT(errors[1], HasSubstr("desync check before all_reduce #3"));
  EXPECT_THAT(errors[1], HasSubstr("flight recorder of rank 1"));
  EXPECT_THAT(errors[1], HasSubstr("all_reduce #1 (float32, [4], sum): completed"));
  EXPECT_THAT(errors[1], HasSubstr("rank 0: broadcast #2 (float32, [3], root 1)"));
  EXPECT_THAT(errors[1], HasSubstr("rank 1: all_reduce #3 (float32, [5], sum)"));
}

// The same through init_process_group with EMBER_DISTRIBUTED_DEBUG=DETAIL in the environment:
// the group it makes has the debug store already, so the report names every rank's last call.
TEST(FlightRecorder, InitProcessGroupGivesItsGroupsTheDebugStore) {
  ::setenv("EMBER_DISTRIBUTED_DEBUG", "DETAIL", 1);
  auto store = std::make_shared<HashStore>();
  std::latch done(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        InitOptions o;
        o.rank = r;
        o.world_size = 2;
        o.store = store;
        o.timeout_ms = 600;
        auto pg = init_process_group("tcp", o);
        EXPECT_EQ(pg->debug_level(), DebugLevel::kDetail);
        try {
          pg->all_reduce(ones({4}))->wait();
          if (r == 1) pg->broadcast(ones({3}), 0)->wait();
        } catch (...) {
          done.arrive_and_wait();
          throw;
        }
        done.arrive_and_wait();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  ::unsetenv("EMBER_DISTRIBUTED_DEBUG");
  destroy_process_group();
  EXPECT_EQ(errors[0], "");
  EXPECT_THAT(errors[1], HasSubstr("last collective each rank entered"));
  EXPECT_THAT(errors[1], HasSubstr("rank 0: all_reduce #1 (float32, [4], sum)"));
  EXPECT_THAT(errors[1], HasSubstr("rank 1: broadcast #2 (float32, [3], root 0)"));
}

TEST(FlightRecorder, KeepsTheLastEntriesWithTheirState) {
  FlightRecorder rec(2);
  auto a = rec.enter(1, "all_reduce #1");
  a->duration_us.store(1500);
  rec.enter(2, "broadcast #2")->failed.store(true);
  rec.enter(3, "barrier #3");
  const std::string dump = rec.dump(0);
  EXPECT_THAT(dump, ::testing::Not(HasSubstr("all_reduce #1")));
  EXPECT_THAT(dump, HasSubstr("broadcast #2"));
  EXPECT_THAT(dump, HasSubstr("barrier #3: running for"));
  EXPECT_EQ(rec.last_entered(), "barrier #3");
}

// A backend that does not check collective arguments itself, as mpi and nccl: it relays each
// operation to a tcp group, keeping the base class's checks_arguments (rooted collectives
// unchecked), so the base class's argument check is what stands between mismatched roots
// and the relayed collective.
class RelayGroup final : public ProcessGroup {
 public:
  explicit RelayGroup(ProcessGroupTCP& inner) : ProcessGroup(inner.rank(), inner.size()), inner_(inner) {}
  std::string backend_name() const override { return "relay"; }
  bool is_broken() const override { return inner_.is_broken(); }
  std::string broken_reason() const override { return inner_.broken_reason(); }

 protected:
  std::shared_ptr<Work> all_reduce_impl(const OpInfo&, std::vector<Tensor> t, ReduceOp op) override {
    return inner_.all_reduce(t, op);
  }
  std::shared_ptr<Work> broadcast_impl(const OpInfo&, std::vector<Tensor> t, int root) override {
    ++relayed_rooted;
    return inner_.broadcast(t, root);
  }
  std::shared_ptr<Work> reduce_impl(const OpInfo&, std::vector<Tensor> t, int root, ReduceOp op) override {
    ++relayed_rooted;
    return inner_.reduce(t, root, op);
  }
  std::shared_ptr<Work> all_gather_impl(const OpInfo&, std::vector<Tensor> out, Tensor in) override {
    return inner_.all_gather(out, in);
  }
  std::shared_ptr<Work> reduce_scatter_impl(const OpInfo&, Tensor out, std::vector<Tensor> in, ReduceOp op) override {
    return inner_.reduce_scatter(out, in, op);
  }
  std::shared_ptr<Work> barrier_impl(const OpInfo&) override { return inner_.barrier(); }
  std::shared_ptr<Work> send_impl(const OpInfo&, std::vector<Tensor> t, int dst, int tag) override {
    return inner_.send(t, dst, tag);
  }
  std::shared_ptr<Work> recv_impl(const OpInfo&, std::vector<Tensor> t, int src, int tag) override {
    return inner_.recv(t, src, tag);
  }
  void check_device(const std::string&, const Tensor&) const override {}

 public:
  int relayed_rooted = 0;

 private:
  ProcessGroupTCP& inner_;
};

// Note [Argument check], with no debug level: mismatched roots fail on every rank naming each
// rank's call before the backend runs anything, and the group stays usable.
TEST(ArgumentCheck, MismatchedRootsFailBeforeABackendThatDoesNotCheckThemRuns) {
  for (OpType type : {OpType::BROADCAST, OpType::REDUCE}) {
    std::vector<int> relayed(2, -1);
    auto errors = on_ranks(2, 20000, DebugLevel::kOff, [&](int r, ProcessGroupTCP& inner, std::shared_ptr<Store>) {
      RelayGroup pg(inner);
      Tensor t = ones({8});
      try {
        (type == OpType::BROADCAST ? pg.broadcast(t, r) : pg.reduce(t, r))->wait();
      } catch (const DistributedError& e) {
        relayed[r] = pg.relayed_rooted;
        // Usable: matching roots run, and the result is right.
        Tensor b = full({4}, r == 1 ? 5.0 : 0.0);
        pg.broadcast(b, 1)->wait();
        EXPECT_EQ(b.to_vector<float>(), std::vector<float>(4, 5.0f));
        throw;
      }
    });
    const std::string name = op_type_name(type);
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(relayed[r], 0) << "rank " << r << ": the mismatched " << name << " reached the backend";
      EXPECT_THAT(errors[r], HasSubstr("relay rank " + std::to_string(r) + "/2: argument mismatch"));
      EXPECT_THAT(errors[r], HasSubstr("rank 0 called " + name + " #1 (float32, [8], root 0"));
      EXPECT_THAT(errors[r], HasSubstr("rank 1 called " + name + " #1 (float32, [8], root 1"));
    }
  }
}

}  // namespace
}  // namespace ember::parallel
