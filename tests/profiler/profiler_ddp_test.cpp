// The profiler under DistributedDataParallel with two ranks as processes (tcp backend): each
// bucket's all_reduce is a span with its bucket index and bytes, rank 0 writes one trace with a
// process per rank, and each rank's overlap figure is in [0, 1].
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "autograd/ops.h"
#include "core/ops/factory.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "parallel/distributed/init.h"
#include "parallel/distributed_data_parallel.h"
#include "profiler/distributed_trace.h"
#include "tests/parallel/process_test_util.h"

using namespace ember;
namespace prof = ember::profiler;

namespace {

struct Net : nn::Cloneable<Net> {
  std::shared_ptr<nn::LinearImpl> fc1, fc2, fc3;
  Net() : Cloneable("Net") { reset(); }
  void reset() override {
    fc1 = register_module("fc1", std::make_shared<nn::LinearImpl>(32, 64));
    fc2 = register_module("fc2", std::make_shared<nn::LinearImpl>(64, 64));
    fc3 = register_module("fc3", std::make_shared<nn::LinearImpl>(64, 8));
  }
  Tensor forward(const Tensor& x) { return fc3->forward(tanh(fc2->forward(tanh(fc1->forward(x))))); }
};

std::string check_trace(const std::string& path, int64_t param_bytes, size_t num_buckets,
                        const prof::DistributedTraceSummary& s) {
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);
  std::map<int, std::set<int64_t>> buckets;          // rank -> bucket indices seen
  std::map<int, std::map<int64_t, int64_t>> bytes;   // rank -> bucket -> bytes
  std::set<int> pids;
  for (const auto& e : j["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e["ph"] == "X" && e["name"] == "DDP.bucket_all_reduce") {
      if (!e.contains("args") || !e["args"].contains("bucket") || !e["args"].contains("bytes")) return "span without args: " + e.dump();
      if (e["tid"].get<uint32_t>() != prof::kCommTrack) return "bucket span off the communication track";
      int pid = e["pid"].get<int>();
      buckets[pid].insert(e["args"]["bucket"].get<int64_t>());
      bytes[pid][e["args"]["bucket"].get<int64_t>()] = e["args"]["bytes"].get<int64_t>();
    }
  }
  if (pids != std::set<int>{0, 1}) return "pids in the trace: " + ::testing::PrintToString(pids);
  for (int r = 0; r < 2; ++r) {
    if (buckets[r].size() != num_buckets) return "rank " + std::to_string(r) + ": " + std::to_string(buckets[r].size()) +
                                                 " bucket indices, expected " + std::to_string(num_buckets);
    int64_t total = 0;
    for (auto [b, n] : bytes[r]) total += n;
    if (total != param_bytes) return "rank " + std::to_string(r) + ": bucket bytes sum to " + std::to_string(total) +
                                     ", the parameters hold " + std::to_string(param_bytes);
    if (s.comm_overlap.size() != 2 || !(s.comm_overlap[r] >= 0 && s.comm_overlap[r] <= 1))
      return "overlap of rank " + std::to_string(r) + " not in [0, 1]: " + prof::overlap_report(s);
    if (s.num_events[r] <= 0) return "rank " + std::to_string(r) + " recorded no events";
  }
  return "";
}

}  // namespace

TEST(ProfilerDdp, BucketSpansFromBothRanksInOneTrace) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("ember_ddp_trace_" + std::to_string(::getpid()) + ".json")).string();
  auto results = parallel::test::run_ranks(2, [&](int rank) -> std::pair<int, std::string> {
    try {
      auto pg = parallel::init_process_group("tcp");
      manual_seed(1);
      auto net = std::make_shared<Net>();
      parallel::DistributedDataParallelOptions o;
      o.bucket_cap_mb = 0.004;  // several buckets
      o.timeout_ms = 30000;
      parallel::DistributedDataParallel<Net> ddp(net, pg, o);
      const size_t num_buckets = ddp.reducer().bucket_parameter_indices().size();
      int64_t param_bytes = 0;
      for (const Tensor& p : net->parameters()) param_bytes += static_cast<int64_t>(p.nbytes());
      Tensor x = ones({16, 32});
      for (int step = 0; step < 4; ++step) {
        if (step == 1) prof::start();  // the first step rebuilds buckets; profile the steady ones
        net->zero_grad();
        sum(ddp(x)).backward();
      }
      prof::stop();
      auto s = prof::export_distributed_chrome_trace(*pg, path);
      std::string err;
      if (rank == 0) {
        if (num_buckets < 2) err = "the model has " + std::to_string(num_buckets) + " bucket(s); expected several";
        else err = check_trace(path, param_bytes, num_buckets, s);
      }
      parallel::destroy_process_group();
      return {err.empty() ? 0 : 1, err};
    } catch (const std::exception& e) {
      return {2, e.what()};
    }
  });
  for (const auto& r : results) EXPECT_TRUE(r.exited_ok()) << r.describe();
  std::filesystem::remove(path);
}
