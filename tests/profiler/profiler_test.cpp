// core/profiler.h in one process: what is recorded on and off, span nesting, the autograd
// worker's track, the overlap figure and the Chrome trace JSON.
#include "core/profiler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "autograd/ops.h"
#include "core/ops/factory.h"

using namespace ember;
namespace prof = ember::profiler;

namespace {

std::vector<prof::Event> named(const std::vector<prof::Event>& all, const std::string& name) {
  std::vector<prof::Event> out;
  for (const auto& e : all) {
    if (e.name == name) out.push_back(e);
  }
  return out;
}

prof::Event ev(prof::Category c, int64_t a, int64_t b, uint32_t track = 1) {
  prof::Event e;
  e.name.assign(1, 'x');
  e.category = c;
  e.start_ns = a;
  e.end_ns = b;
  e.track = track;
  return e;
}

}  // namespace

TEST(Profiler, OffRecordsNothing) {
  prof::start();
  prof::stop();
  Tensor a = ones({4, 4});
  Tensor b = add(a, a);
  { EMBER_PROFILE_SCOPE("user.scope", kUser); }
  EXPECT_TRUE(prof::events().empty());
  EXPECT_FALSE(prof::enabled());
}

TEST(Profiler, OpsAndUserSpansNestOnTheCallingThread) {
  Tensor a = ones({64, 64});
  prof::start();
  {
    EMBER_PROFILE_SCOPE("step", kUser);
    Tensor c = matmul(add(a, a), a);
    (void)sum(c);
  }
  prof::stop();
  auto all = prof::events();
  auto step = named(all, "step");
  ASSERT_EQ(step.size(), 1u);
  auto gemm = named(all, "gemm");
  ASSERT_FALSE(gemm.empty());
  auto adds = named(all, "add");
  ASSERT_FALSE(adds.empty()) << "no span for the add kernel";
  for (const auto& child : {gemm[0], adds[0]}) {
    EXPECT_EQ(child.track, step[0].track);
    EXPECT_EQ(child.category, prof::Category::kOp);
    EXPECT_GE(child.start_ns, step[0].start_ns);
    EXPECT_LE(child.end_ns, step[0].end_ns);
    EXPECT_LE(child.start_ns, child.end_ns);
  }
}

TEST(Profiler, BackwardNodesAreAutogradSpansWithTheirNames) {
  Tensor w = ones({8, 8}).requires_grad_();
  Tensor x = ones({4, 8});
  prof::start();
  Tensor loss = sum(matmul(x, w));
  loss.backward();
  prof::stop();
  auto all = prof::events();
  std::vector<std::string> autograd;
  for (const auto& e : all) {
    if (e.category == prof::Category::kAutograd) autograd.push_back(e.name);
  }
  EXPECT_NE(std::find_if(autograd.begin(), autograd.end(), [](const std::string& n) { return n.rfind("SumBackward", 0) == 0; }),
            autograd.end()) << "autograd spans: " << ::testing::PrintToString(autograd);
  EXPECT_NE(std::find(autograd.begin(), autograd.end(), "MmBackward0"), autograd.end())
      << "autograd spans: " << ::testing::PrintToString(autograd);
  // The gemm of MmBackward0 runs inside that node's span.
  auto mm = named(all, "MmBackward0");
  ASSERT_EQ(mm.size(), 1u);
  bool inner_gemm = false;
  for (const auto& e : named(all, "gemm")) {
    inner_gemm |= e.track == mm[0].track && e.start_ns >= mm[0].start_ns && e.end_ns <= mm[0].end_ns;
  }
  EXPECT_TRUE(inner_gemm);
}

TEST(Profiler, StartDropsEarlierEvents) {
  prof::start();
  { EMBER_PROFILE_SCOPE("first", kUser); }
  prof::start();
  { EMBER_PROFILE_SCOPE("second", kUser); }
  prof::stop();
  auto all = prof::events();
  EXPECT_TRUE(named(all, "first").empty());
  EXPECT_EQ(named(all, "second").size(), 1u);
}

TEST(Profiler, CommOverlapIsTheShareOfCommunicationUnderComputation) {
  using C = prof::Category;
  // comm [0, 100) and [200, 300); compute [50, 120), [110, 150) and [250, 400) on two tracks:
  // overlapped 50 + 50 of 200.
  std::vector<prof::Event> e{ev(C::kComm, 0, 100, prof::kCommTrack), ev(C::kComm, 200, 300, prof::kCommTrack),
                             ev(C::kOp, 50, 120, 1), ev(C::kAutograd, 110, 150, 2), ev(C::kOp, 250, 400, 1),
                             ev(C::kDataLoader, 0, 300, 3)};
  EXPECT_DOUBLE_EQ(prof::comm_overlap(e), 0.5);
  EXPECT_DOUBLE_EQ(prof::comm_overlap({ev(C::kComm, 0, 10, prof::kCommTrack), ev(C::kOp, 0, 10)}), 1.0);
  EXPECT_DOUBLE_EQ(prof::comm_overlap({ev(C::kComm, 0, 10, prof::kCommTrack), ev(C::kOp, 10, 20)}), 0.0);
  EXPECT_EQ(prof::comm_overlap({ev(C::kOp, 0, 10)}), -1);
  // A wait for communication inside a node's span is not computation: comm [0, 100), a node
  // [0, 100) holding a wait [40, 90) -> 50 of 100.
  EXPECT_DOUBLE_EQ(prof::comm_overlap({ev(C::kComm, 0, 100, prof::kCommTrack), ev(C::kAutograd, 0, 100),
                                       ev(C::kCommWait, 40, 90)}),
                   0.5);
}

TEST(Profiler, ChromeTraceIsValidJsonWithOneTrackPerThread) {
  Tensor w = ones({8, 8}).requires_grad_();
  prof::start();
  sum(matmul(ones({2, 8}), w)).backward();
  prof::stop();
  std::string name = "ember_trace_";
  name.append(std::to_string(::getpid())).append(".json");
  auto path = (std::filesystem::temp_directory_path() / name).string();
  prof::export_chrome_trace(path);
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);  // throws on invalid JSON
  std::filesystem::remove(path);
  ASSERT_TRUE(j["traceEvents"].is_array());
  size_t spans = 0;
  std::set<int> tids, named_tids;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("tid") && e.contains("name")) << e.dump();
    if (e["ph"] == "X") {
      ++spans;
      EXPECT_TRUE(e["ts"].is_number() && e["dur"].is_number() && e["dur"].get<double>() >= 0) << e.dump();
      tids.insert(e["tid"].get<int>());
    } else if (e["ph"] == "M" && e["name"] == "thread_name") {
      named_tids.insert(e["tid"].get<int>());
    }
  }
  EXPECT_EQ(spans, prof::events().size());
  for (int t : tids) EXPECT_TRUE(named_tids.count(t)) << "track " << t << " has no thread_name";
}
