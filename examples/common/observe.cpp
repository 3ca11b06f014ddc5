#include "examples/common/observe.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/allocator.h"
#include "core/error.h"
#include "core/profiler.h"
#include "nn/utils/clip_grad.h"
#include "profiler/distributed_trace.h"

namespace ember_examples {

void add_observe_flags(CLI::App& app, ObserveFlags& flags) {
  app.add_option("--tensorboard", flags.tensorboard_dir,
                 "write TensorBoard event files into DIR (rank 0): per step loss, learning rate, samples/s, "
                 "gradient norm and the allocator's peak bytes; per epoch the evaluation figures")
      ->type_name("DIR");
  app.add_option("--profile", flags.profile_path,
                 "write a Chrome trace (Perfetto, chrome://tracing) of --profile-steps steps to PATH; under --ddp "
                 "one file from rank 0 with every rank, and the share of communication that overlapped computation")
      ->type_name("PATH");
  app.add_option("--profile-steps", flags.profile_steps, "steps in the --profile trace, from the run's second")
      ->check(ember::cli::at_least(1))
      ->type_name("N");
}

TrainingObserver::TrainingObserver(const ObserveFlags& flags, std::shared_ptr<ember::parallel::ProcessGroup> group,
                                   ember::Device device, std::string prefix, std::string throughput)
    : flags_(flags),
      group_(std::move(group)),
      device_(device),
      prefix_(std::move(prefix)),
      throughput_(std::move(throughput)) {
  if (!flags_.tensorboard_dir.empty()) writer_ = std::make_unique<ember::SummaryWriter>(flags_.tensorboard_dir);
}

TrainingObserver::~TrainingObserver() {
  if (profile_first_ >= 0 && !profile_done_) ember::profiler::stop();
}

void TrainingObserver::before_step(int64_t step) {
  ++steps_seen_;
  if (flags_.profile_path.empty() || profile_done_ || profile_first_ >= 0 || steps_seen_ < 2) return;
  profile_first_ = step;
  ember::profiler::start();
}

void TrainingObserver::after_step(int64_t step, double loss, int64_t global_samples, double lr,
                                  const std::vector<ember::Tensor>& params, double grad_norm) {
  const auto now = std::chrono::steady_clock::now();
  if (writer_ && writer_->enabled()) {
    writer_->add_scalar("train/loss", loss, step);
    writer_->add_scalar("train/lr", lr, step);
    if (have_last_) {
      const double s = std::chrono::duration<double>(now - last_).count();
      if (s > 0) writer_->add_scalar("train/" + throughput_, static_cast<double>(global_samples) / s, step);
    }
    // clip_grad_norm_ with an infinite bound scales nothing: it is the norm alone.
    if (std::isnan(grad_norm)) grad_norm = ember::nn::utils::clip_grad_norm_(params, std::numeric_limits<double>::infinity());
    writer_->add_scalar("train/grad_norm", grad_norm, step);
    writer_->add_scalar("memory/peak_allocated_bytes",
                        static_cast<double>(ember::memory_stats(device_).allocated_bytes_peak), step);
  }
  last_ = now;
  have_last_ = true;
  if (profile_first_ >= 0 && !profile_done_ && step - profile_first_ + 1 >= flags_.profile_steps) finish_profile(step);
}

void TrainingObserver::epoch_end(int64_t step, const std::map<std::string, double>& scalars) {
  if (!writer_ || !writer_->enabled()) return;
  for (const auto& [name, value] : scalars) writer_->add_scalar("epoch/" + name, value, step);
  writer_->flush();
}

void TrainingObserver::finish_profile(int64_t last_step) {
  ember::profiler::stop();
  profile_done_ = true;
  std::string report;
  size_t events = 0;
  if (group_) {
    const auto summary = ember::profiler::export_distributed_chrome_trace(*group_, flags_.profile_path);
    if (group_->rank() != 0) return;
    for (int64_t n : summary.num_events) events += static_cast<size_t>(n);
    report = ember::profiler::overlap_report(summary);
  } else {
    const auto all = ember::profiler::events();
    events = all.size();
    ember::profiler::export_chrome_trace(flags_.profile_path);
    ember::profiler::DistributedTraceSummary one;
    one.comm_overlap.push_back(ember::profiler::comm_overlap(all));
    report = ember::profiler::overlap_report(one);
  }
  std::printf("%s: profiled steps %lld-%lld into %s (%zu spans); %s\n", prefix_.c_str(),
              static_cast<long long>(profile_first_), static_cast<long long>(last_step), flags_.profile_path.c_str(),
              events, report.c_str());
  std::fflush(stdout);
}

void append_metrics_line(const std::string& path, const std::string& json) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream f(path, std::ios::app);
  EMBER_CHECK(f.good(), "cannot open the metrics file ", path);
  f << json << '\n';
  f.flush();
  EMBER_CHECK(f.good(), "cannot write the metrics file ", path);
}

int64_t unix_time_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace ember_examples
