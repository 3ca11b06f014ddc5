// ProcessGroup::all_reduce_coalesced on the tcp backend, ranks as threads: several tensors
// reduced as one flat tensor, in place, on every path (shared memory in one round and in many
// rounds that cut across tensors, same-host copy, TCP ring), world sizes 1-4, every dtype and
// op, with 0-element and 2-D tensors among them. Element i of the flat concatenation has the
// closed form of process_group_test_util.h. A rank may call the equivalent all_reduce of one
// flat tensor instead (also under the desync check). Argument errors, and a backend without
// the collective, are typed errors before anything runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/ops/native.h"
#include "parallel/distributed/tcp/process_group_tcp.h"
#include "tests/parallel/process_group_test_util.h"
#include "tests/parallel/tcp_groups.h"
#include "tests/support/error_text.h"

namespace ember::parallel {
namespace {

using test::Groups;
using test::on_ranks;

// Shapes of the tensors reduced together: empty ones first, between and last, a 2-D one, and
// one that spans many 4 KiB shared-memory rounds.
const std::vector<std::vector<int64_t>> kShapes = {{0}, {5}, {0}, {3, 7}, {1001}, {100003}, {1}, {0}};

// Rank r's tensors: element j of tensor k is value(r, start_k + j), start_k its flat offset.
std::vector<Tensor> rank_tensors(DType dtype, int r) {
  std::vector<Tensor> out;
  int64_t start = 0;
  for (const auto& shape : kShapes) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    Tensor flat = test::make_tensor_of(dtype, numel, [r, start](int64_t j) { return test::value(r, start + j); });
    out.push_back(native::reshape(flat, shape));
    start += numel;
  }
  return out;
}

// "" when tensor k holds the reduction of its flat positions, else the first difference.
std::string check_tensors(ProcessGroup& pg, const std::vector<Tensor>& ts, DType dtype, ReduceOp op) {
  int64_t start = 0;
  for (size_t k = 0; k < ts.size(); ++k) {
    std::ostringstream what;
    what << test::tag(pg, "all_reduce_coalesced", dtype, ts[k].numel()) << " " << op << " tensor " << k;
    const std::string err = test::compare(what.str(), native::reshape(ts[k], {-1}), ts[k].numel(), [&](int64_t j) {
      return test::expected_reduction(op, dtype, pg.size(), start + j);
    });
    if (!err.empty()) return err;
    start += ts[k].numel();
  }
  return "";
}

enum class Path { kShm, kShmManyRounds, kSameHostCopy, kRing };

ProcessGroupTCPOptions options_for(Path path) {
  ProcessGroupTCPOptions o = test::tcp_options(20'000, path == Path::kShm || path == Path::kShmManyRounds);
  if (path == Path::kShmManyRounds) o.shm_bytes = 4096;
  if (path == Path::kSameHostCopy) o.cma_min_bytes = 0;
  if (path == Path::kRing) o.same_host_copy = false;
  return o;
}

std::string path_and_world_name(const ::testing::TestParamInfo<std::tuple<Path, int>>& info) {
  static const char* const kNames[] = {"shm", "shm_many_rounds", "same_host_copy", "ring"};
  return std::string(kNames[static_cast<int>(std::get<0>(info.param))]) + "_" + std::to_string(std::get<1>(info.param)) +
         "_ranks";
}

class CoalescedPath : public ::testing::TestWithParam<std::tuple<Path, int>> {};

TEST_P(CoalescedPath, EveryDtypeAndOpMatchesTheClosedFormOfTheFlatConcatenation) {
  const auto [path, world] = GetParam();
  Groups groups = test::make_groups(world, options_for(path));
  if (world > 1 && path == Path::kSameHostCopy && !groups[0]->same_host_copy_active())
    GTEST_SKIP() << "process_vm_readv is not permitted on this machine (ptrace restrictions)";
  if (world > 1) {
    EXPECT_EQ(groups[0]->shared_memory_active(), path == Path::kShm || path == Path::kShmManyRounds);
  }
  on_ranks(groups, [](ProcessGroupTCP& pg) {
    EXPECT_TRUE(pg.supports_all_reduce_coalesced());
    for (DType dtype : test::kDTypes) {
      for (ReduceOp op : test::kOps) {
        std::vector<Tensor> ts = rank_tensors(dtype, pg.rank());
        std::vector<const void*> data;
        for (const auto& t : ts) data.push_back(t.raw_data());
        pg.all_reduce_coalesced(ts, op)->wait();
        EXPECT_EQ(check_tensors(pg, ts, dtype, op), "");
        for (size_t k = 0; k < ts.size(); ++k) EXPECT_EQ(ts[k].raw_data(), data[k]) << "in place";
      }
    }
  });
}

// Rank 0 reduces its pieces coalesced, the others one flat tensor of the same elements: the
// same collective (the contract DDP's Note [Direct buckets] relies on), also when the desync
// check compares the ranks' calls.
TEST_P(CoalescedPath, RanksMayCallTheFlatAllReduceInstead) {
  const auto [path, world] = GetParam();
  if (world == 1) GTEST_SKIP() << "needs two ranks";
  Groups groups = test::make_groups(world, options_for(path));
  if (path == Path::kSameHostCopy && !groups[0]->same_host_copy_active())
    GTEST_SKIP() << "process_vm_readv is not permitted on this machine (ptrace restrictions)";
  for (auto& g : groups) g->set_debug_level(DebugLevel::kDetail);
  on_ranks(groups, [](ProcessGroupTCP& pg) {
    for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVG}) {
      std::vector<Tensor> ts = rank_tensors(kFloat32, pg.rank());
      if (pg.rank() == 0) {
        pg.all_reduce_coalesced(ts, op)->wait();
      } else {
        std::vector<Tensor> flat_parts;
        for (const auto& t : ts) flat_parts.push_back(native::reshape(t, {-1}));
        Tensor flat = native::cat(flat_parts, 0);
        pg.all_reduce(flat, op)->wait();
        int64_t off = 0;
        for (auto& t : ts) {
          native::copy_(t, native::view(native::narrow(flat, 0, off, t.numel()), t.sizes()));
          off += t.numel();
        }
      }
      EXPECT_EQ(check_tensors(pg, ts, kFloat32, op), "");
    }
  });
}

INSTANTIATE_TEST_SUITE_P(PathsAndWorlds, CoalescedPath,
                         ::testing::Combine(::testing::Values(Path::kShm, Path::kShmManyRounds, Path::kSameHostCopy,
                                                              Path::kRing),
                                            ::testing::Values(1, 2, 3, 4)),
                         path_and_world_name);

TEST(AllReduceCoalesced, MixedDtypesEmptyListsAndNonContiguousTensorsAreRejectedBeforeAnythingRuns) {
  Groups groups = test::make_groups(1, test::tcp_options(20'000, true));
  ProcessGroupTCP& pg = *groups[0];
  EXPECT_THROW(pg.all_reduce_coalesced({}), ValueError);
  EXPECT_THROW(pg.all_reduce_coalesced({zeros({3}), zeros({3}, TensorOptions(kFloat64))}), TypeError);
  Tensor t = zeros({3, 4});
  EXPECT_THROW(pg.all_reduce_coalesced({zeros({2}), native::transpose(t, 0, 1)}), ValueError);
  // The group is still usable.
  std::vector<Tensor> ok = {ones({2})};
  pg.all_reduce_coalesced(ok)->wait();
  EXPECT_EQ(ok[0].to_vector<float>(), (std::vector<float>{1, 1}));
}

// A backend that has no coalesced all_reduce (the base class's default).
class PlainGroup final : public ProcessGroup {
 public:
  PlainGroup() : ProcessGroup(0, 1) {}
  std::string backend_name() const override { return "plain"; }
  bool is_broken() const override { return false; }
  std::string broken_reason() const override { return ""; }

 protected:
  std::shared_ptr<Work> done(const OpInfo& info) {
    auto w = std::make_shared<Work>(info.description);
    w->finish();
    return w;
  }
  std::shared_ptr<Work> all_reduce_impl(const OpInfo& i, std::vector<Tensor>, ReduceOp) override { return done(i); }
  std::shared_ptr<Work> broadcast_impl(const OpInfo& i, std::vector<Tensor>, int) override { return done(i); }
  std::shared_ptr<Work> reduce_impl(const OpInfo& i, std::vector<Tensor>, int, ReduceOp) override { return done(i); }
  std::shared_ptr<Work> all_gather_impl(const OpInfo& i, std::vector<Tensor>, Tensor) override { return done(i); }
  std::shared_ptr<Work> reduce_scatter_impl(const OpInfo& i, Tensor, std::vector<Tensor>, ReduceOp) override {
    return done(i);
  }
  std::shared_ptr<Work> barrier_impl(const OpInfo& i) override { return done(i); }
  std::shared_ptr<Work> send_impl(const OpInfo& i, std::vector<Tensor>, int, int) override { return done(i); }
  std::shared_ptr<Work> recv_impl(const OpInfo& i, std::vector<Tensor>, int, int) override { return done(i); }
  void check_device(const std::string&, const Tensor&) const override {}
};

TEST(AllReduceCoalesced, ABackendWithoutItIsAValueErrorNamingIt) {
  PlainGroup pg;
  EXPECT_FALSE(pg.supports_all_reduce_coalesced());
  const std::string err = support::error_of<ValueError>([&] { pg.all_reduce_coalesced({zeros({2})}); });
  EXPECT_THAT(err, ::testing::HasSubstr("all_reduce_coalesced"));
  EXPECT_THAT(err, ::testing::HasSubstr("plain"));
}

}  // namespace
}  // namespace ember::parallel
