// ember-bench-data: DataLoader throughput and first-batch latency on batches of 64
// variable-length int64 sequences (lengths 10-50) through PadCollate with trivial per-sample
// work, in the main process and with 2 forked workers; then the same work through PyTorch's
// DataLoader (bench/bench_data_torch.py under bench::peer_python(), bounded) in the same run.
// Prints `name value unit` lines; each value is the median of several runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "core/ops/factory.h"
#include "core/thread_pool.h"
#include "data/dataloader.h"
#include "data/pad_collate.h"

#ifndef EMBER_BENCH_TORCH_SCRIPT
#define EMBER_BENCH_TORCH_SCRIPT "bench/bench_data_torch.py"
#endif

namespace {

using ember::bench::median;

using namespace ember;
using namespace ember::data;
using Clock = std::chrono::steady_clock;

constexpr size_t kBatchSize = 64;
constexpr int kReps = 5;

// Sample i: a sequence of 10 + (i * 2654435761) % 41 copies of i % 1000 (bench_data_torch.py matches).
struct VarSeq : Dataset<Tensor> {
  explicit VarSeq(size_t n) : n(n) {}
  Tensor get(size_t i) override {
    const int64_t len = 10 + static_cast<int64_t>((i * 2654435761ull) % 41);
    Tensor t = empty({len}, TensorOptions(kInt64));
    int64_t* p = t.data_ptr<int64_t>();
    for (int64_t k = 0; k < len; ++k) p[k] = static_cast<int64_t>(i % 1000);
    return t;
  }
  size_t size() const override { return n; }
  size_t n;
};

using bench::ms_between;
struct Run {
  double batches_per_s;  // after the first batch
  double first_batch_ms;  // from begin() (forking the workers) to the first batch
};

Run run_loader(int workers, size_t num_batches) {
  auto ds = std::make_shared<VarSeq>(num_batches * kBatchSize);
  DataLoader loader(ds, DataLoaderOptions{.batch_size = kBatchSize, .num_workers = workers}, PadCollate(0, true));
  auto t0 = Clock::now();
  Clock::time_point t1;
  size_t n = 0;
  int64_t checksum = 0;
  for (auto& [padded, lengths] : loader) {
    if (n == 0) t1 = Clock::now();
    checksum += lengths.data_ptr<int64_t>()[0] + padded.size(1);
    ++n;
  }
  auto t2 = Clock::now();
  if (n != num_batches || checksum == 0) {
    std::fprintf(stderr, "bench_data: expected %zu batches, got %zu\n", num_batches, n);
    std::exit(1);
  }
  return {static_cast<double>(n - 1) / (ms_between(t1, t2) / 1000.0), ms_between(t0, t1)};
}

// The PyTorch peer's figures; batches_per_s is negative when it is unavailable (`why` says why).
struct TorchRun {
  double batches_per_s = -1, first_batch_ms = -1;
  std::string version, why;
};

TorchRun run_torch(size_t num_batches) {
  const char* script = std::getenv("EMBER_BENCH_TORCH_SCRIPT");
  const std::string python = bench::peer_python();
  const int timeout_s = bench::peer_timeout_s();
  const bench::BoundedRun run =
      bench::run_bounded({python, script ? script : EMBER_BENCH_TORCH_SCRIPT, "--batches", std::to_string(num_batches),
                          "--reps", std::to_string(kReps)},
                         timeout_s);
  TorchRun r;
  for (const std::string& line : bench::output_lines(run.output)) {
    double v = 0;
    if (std::sscanf(line.c_str(), "torch_loader_batches_per_s_w2 %lf", &v) == 1) r.batches_per_s = v;
    if (std::sscanf(line.c_str(), "torch_loader_first_batch_ms_w2 %lf", &v) == 1) r.first_batch_ms = v;
    bench::parse_torch_line(line, r.version);
  }
  if (run.timed_out) {
    r.batches_per_s = -1;
    r.why = python + " timed out after " + std::to_string(timeout_s) + " s (EMBER_BENCH_PEER_TIMEOUT_S); killed";
  } else if (!run.ok() || r.batches_per_s <= 0) {
    r.batches_per_s = -1;
    r.why = python + " did not report (" + bench::one_line(run.output, 300) + ")";
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  ember::bench::start_without_flags("ember-bench-data",
                                    "DataLoader batches/s and first-batch latency, in process and with 2 workers, "
                                    "against PyTorch's DataLoader. Takes no flags (EMBER_BENCH_TORCH_SCRIPT, "
                                    "EMBER_BENCH_PEER_TIMEOUT_S).",
                                    argc, argv);
  ember::set_num_threads(1);  // the loader's own cost, not intra-op threads
  const size_t w0_batches = 1000, w2_batches = 2000, torch_batches = 1000;

  run_loader(0, 50);  // warm caches and the allocator
  std::vector<double> w0, w2, first;
  for (int r = 0; r < kReps; ++r) w0.push_back(run_loader(0, w0_batches).batches_per_s);
  for (int r = 0; r < kReps; ++r) {
    Run run = run_loader(2, w2_batches);
    w2.push_back(run.batches_per_s);
    first.push_back(run.first_batch_ms);
  }
  std::printf("loader_batches_per_s_w0 %.0f batches/s\n", median(w0));
  std::printf("loader_batches_per_s_w2 %.0f batches/s\n", median(w2));
  std::printf("loader_first_batch_ms_w2 %.2f ms\n", median(first));
  std::fflush(stdout);

  const TorchRun torch = run_torch(torch_batches);
  bench::print_peer_version(torch.batches_per_s > 0 ? torch.version : "", "torch DataLoader peer", torch.why);
  if (torch.batches_per_s > 0) {
    std::printf("torch_loader_batches_per_s_w2 %.0f batches/s\n", torch.batches_per_s);
    std::printf("loader_vs_torch_batches_ratio_w2 %.2f x\n", median(w2) / torch.batches_per_s);
    if (torch.first_batch_ms > 0) {
      std::printf("torch_loader_first_batch_ms_w2 %.2f ms\n", torch.first_batch_ms);
      std::printf("loader_vs_torch_first_batch_ratio_w2 %.3f ratio\n", median(first) / torch.first_batch_ms);
    }
  }
  return 0;
}
