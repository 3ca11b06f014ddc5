// What the examples show of a run besides their log lines: --metrics' JSON lines, TensorBoard curves (--tensorboard
// DIR, ember::SummaryWriter, rank 0 only) and a profiler trace of a few steps (--profile PATH
// --profile-steps N, ember::profiler; under --ddp every rank's spans merged by rank 0).
// TrainingObserver is used by the training loop's thread only.
#pragma once
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/cli.h"
#include "core/device.h"
#include "core/tensor.h"
#include "parallel/distributed/process_group.h"
#include "tensorboard/summary_writer.h"

namespace ember_examples {

/// The flags' values.
struct ObserveFlags {
  std::string tensorboard_dir;  // --tensorboard DIR; empty: no event files
  std::string profile_path;     // --profile PATH; empty: no trace
  int64_t profile_steps = 5;    // --profile-steps N
};

/// Adds --tensorboard, --profile and --profile-steps to `app`.
void add_observe_flags(CLI::App& app, ObserveFlags& flags);

/// --metrics: appends `json` (one object, no newline) as a line to `path`, creating its folder;
/// throws Error naming the file when it cannot be written.
void append_metrics_line(const std::string& path, const std::string& json);
/// Seconds since the epoch, the "time" of a metrics line.
int64_t unix_time_s();

/// Per training step: before_step() and after_step(); at the end of an epoch, epoch_end().
/// The profiled steps are the run's 2nd to (N+1)-th (the first builds caches and DDP's buckets).
class TrainingObserver {
 public:
  /// `group`: the --ddp group (null without); `device`: the training device whose allocator's
  /// peak is logged; `prefix`: the example's name for its log lines; `throughput`: the name of
  /// the per-step rate of after_step's global_samples ("samples_per_s", "tokens_per_s").
  TrainingObserver(const ObserveFlags& flags, std::shared_ptr<ember::parallel::ProcessGroup> group,
                   ember::Device device, std::string prefix, std::string throughput = "samples_per_s");
  ~TrainingObserver();

  void before_step(int64_t step);
  /// After the optimizer's step `step` (counted from 1 over the run): `loss` of this rank's
  /// batch, `global_samples` the step's samples over all ranks, `lr`, and the gradients' norm
  /// (NaN: computed here from the .grad of `params`). Collective under --ddp when the profiled
  /// steps end here.
  void after_step(int64_t step, double loss, int64_t global_samples, double lr, const std::vector<ember::Tensor>& params,
                  double grad_norm = std::numeric_limits<double>::quiet_NaN());
  /// Epoch figures, as scalars "epoch/<name>" at `step`.
  void epoch_end(int64_t step, const std::map<std::string, double>& scalars);

 private:
  void finish_profile(int64_t last_step);

  ObserveFlags flags_;
  std::shared_ptr<ember::parallel::ProcessGroup> group_;
  ember::Device device_;
  std::string prefix_;
  std::string throughput_;
  std::unique_ptr<ember::SummaryWriter> writer_;
  int64_t steps_seen_ = 0;
  int64_t profile_first_ = -1;  // the first profiled step; -1: not started
  bool profile_done_ = false;
  std::chrono::steady_clock::time_point last_;
  bool have_last_ = false;
};

}  // namespace ember_examples
